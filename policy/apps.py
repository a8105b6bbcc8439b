from __future__ import annotations

from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "policy"
