"""Websocket routes of every app (the live view adds its consumer here)."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
