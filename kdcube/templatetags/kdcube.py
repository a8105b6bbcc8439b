"""``{% kdcube_drift %}``: the config-drift card (overview, versions page) when the KDCube bundle's
props differ from the version in force; ``{% kdcube_push_status version %}``: a version's push."""

from __future__ import annotations

from typing import Any

from django import template

from kdcube.services import (
    config_drift,
    config_drift_lines,
    config_drift_sentence,
    kdcube_configured,
    last_read,
    push_status,
)

register = template.Library()


@register.inclusion_tag("kdcube/drift.html", takes_context=True)
def kdcube_drift(context: Any) -> dict[str, Any]:
    configured = kdcube_configured()
    row = config_drift() if configured else None
    read = last_read() if configured else None
    return {
        "drift": row,
        "sentence": config_drift_sentence(row),
        "lines": config_drift_lines(row),
        "inert": read.inert if read else [],
        "can": context.get("can"),
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("kdcube/push.html", takes_context=True)
def kdcube_push_status(context: Any, number: int, *, compact: bool = False) -> dict[str, Any]:
    # One query for the whole versions list, not one per row.
    pushes = context.render_context.get("kdcube_pushes")
    if pushes is None or number not in pushes.get("asked", ()):
        numbers = [getattr(v, "number", None) for v in context.get("versions") or ()]
        asked = {n for n in numbers if isinstance(n, int)} | {number}
        pushes = {"asked": asked, "rows": push_status(sorted(asked))}
        context.render_context["kdcube_pushes"] = pushes
    return {
        "configured": kdcube_configured(),
        "number": number,
        "push": pushes["rows"].get(number),
        "compact": compact,
        "can": context.get("can"),
        "csrf_token": context.get("csrf_token"),
    }
