"""The kinds of round for templates: a chip's class, a ``has`` filter's name and their words come
from the vocabulary's table (``core.vocabulary.ROUND_KINDS``), never spelled in the markup."""

from __future__ import annotations

from django import template

from core.vocabulary import KINDS, RoundKind

register = template.Library()


@register.simple_tag
def round_kind(name: str) -> RoundKind:
    """The kind named ``name`` (``{% round_kind "rejection" as rejection %}``); an unknown name
    is a ``KeyError`` when the page is rendered, which its tests catch."""
    return KINDS[name]
