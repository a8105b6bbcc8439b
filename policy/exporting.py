"""The draft as a download: one response for the API and the page, so their bytes agree."""

from __future__ import annotations

from django.http import HttpResponse

from policy.selectors import draft_state


def draft_export_response() -> HttpResponse:
    """The draft's export (byte-identical to ``traitdeck fmt``) as a YAML attachment."""
    state = draft_state()
    response = HttpResponse(state.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="traitdeck-policy.yaml"'
    response["X-Draft-Revision"] = str(state.revision)
    return response
