"""``role_matrix``: the access table (``accounts.access``) as the README's Markdown tables."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts.access import API, PAGES, TOKENS
from accounts.matrix import markdown_matrix


class Command(BaseCommand):
    help = "Print who may use each page and API route, as Markdown (the README's role matrix)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(markdown_matrix(PAGES, API, TOKENS))
