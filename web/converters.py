"""The path converter for stored identifiers (agents, tool ids, tool names): any text an event
or a policy can hold fits one path segment, so no page depends on an identifier being tame.

``{% url %}`` with ``str`` raises ``NoReverseMatch`` on a ``/`` (one runtime event with tool
``evil/slash`` made the Tools page a 500 for everyone), and a segment ``.``/``..`` would be
resolved by the browser elsewhere in the site. ``<id:…>`` writes ``%`` as ``%25``, ``/`` as
``%2F`` and a whole ``.``/``..`` segment as ``%2E…``; Django's ``reverse`` then quotes those ``%``
once more, the server decodes the path once, and ``to_python`` decodes the rest: the view gets
the identifier back exactly. Tame identifiers keep their plain URLs."""

from __future__ import annotations

from urllib.parse import unquote

from django.urls import register_converter


class IdentifierConverter:
    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return unquote(value)

    def to_url(self, value: str) -> str:
        text = str(value)
        if text in {".", ".."}:
            return "%2E" * len(text)
        return text.replace("%", "%25").replace("/", "%2F")


register_converter(IdentifierConverter, "id")
