"""Websocket routes of every app."""

from __future__ import annotations

from django.urls import path

from observe.consumers import LiveRoundsConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveRoundsConsumer.as_asgi()),
]
