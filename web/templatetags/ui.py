"""Presentation filters shared by every page: words for values, break points for long ids, times.

Nothing here decides anything: it only turns values the views already hold into text a person
reads (never a Python repr such as ``['exploration']`` or ``True``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from engine.document.diagnostics import Diagnostic, risk
from engine.round.overseer import rule_words

register = template.Library()

#: After these characters a long dotted path or id may wrap (never in the middle of a word).
_BREAK_AFTER = re.compile(r"([.\[\]:_])")


@register.filter
def breakable(value: Any) -> SafeString:
    """Escape ``value`` and allow a line break after dots, brackets, colons and underscores, so
    ``agents.main.tools[0].tool_traits.search`` wraps between its parts (never after "/": an
    escaped "&lt;/" stays whole)."""
    text = str(escape("" if value is None else value))
    return mark_safe(_BREAK_AFTER.sub(r"\1<wbr>", text))  # noqa: S308 - escaped just above


def words(value: Any) -> str:
    """A value in words: lists joined with commas, booleans as yes/no, nothing as a dash."""
    if value is None:
        return "—"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {words(item)}" for key, item in value.items()) or "—"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(words(item) for item in value) or "none"
    return str(value)


register.filter("words", words)


@register.filter
def ordinal_attempt(value: Any) -> str:
    """A 0-based attempt (as in the JSON, DESIGN §4) as people count it: 1-based."""
    try:
        return str(int(value) + 1)
    except (TypeError, ValueError):
        return "—"


@register.simple_tag
def when(value: datetime | str | None, style: str = "datetime") -> SafeString:
    """A ``<time>`` the browser shows in the reader's zone (static/js/time.js); the UTC time is
    in its tooltip and, before the script runs, in its text with the zone named."""
    if value is None or value == "":
        return format_html('<span class="muted">{}</span>', "—")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return format_html("{}", value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    utc = value.astimezone(UTC)
    if style == "time":
        shown = utc.strftime("%H:%M:%S") + " UTC"
    elif style == "precise":
        shown = utc.strftime("%Y-%m-%d %H:%M:%S.") + f"{utc.microsecond // 1000:03d} UTC"
    else:
        shown = utc.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    iso = utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return format_html(
        '<time class="when" datetime="{}" data-style="{}" title="{}">{}</time>',
        iso,
        style,
        utc.strftime("%Y-%m-%d %H:%M:%S UTC"),
        shown,
    )


@register.filter
def duration(row: Any) -> str:
    """How long a round took (``finished_at - started_at``) in seconds, or a dash."""
    started, finished = getattr(row, "started_at", None), getattr(row, "finished_at", None)
    if started is None or finished is None:
        return "—"
    seconds = (finished - started).total_seconds()
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


@register.filter(name="risk")
def risk_of(diagnostic: Any) -> str:
    """``high``, ``low`` or ``""``: see ``engine.document.diagnostics.risk``."""
    return risk(diagnostic) if isinstance(diagnostic, Diagnostic) else ""


@register.filter(name="rule_words")
def rule_words_of(code: Any) -> str:
    """A rejection code in a few words (``engine.round.overseer.RULE_WORDS``)."""
    return rule_words(str(code)) if code else ""


#: URL names of the policy app that belong under "Versions" or "Import" in the menu.
_VERSIONS_PAGES = frozenset(
    {"versions", "version", "publish", "diff", "rollback", "impact", "impact-round"}
)


@register.simple_tag(takes_context=True)
def nav_section(context: Any) -> str:
    """The one menu item the current page belongs to (``""``: none)."""
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    if match is None:
        return ""
    app, name = match.app_name, match.url_name
    if name == "overview":
        return "overview"
    if app == "policy":
        if name in _VERSIONS_PAGES:
            return "versions"
        return "import" if name == "import" else "policy"
    if app == "observe":
        if name in ("tools", "tool"):
            return "tools"
        return "history" if name == "history" else "live"
    return {"audit": "audit", "accounts": "tokens"}.get(app, "")
