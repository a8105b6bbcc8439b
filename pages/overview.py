"""The overview: the first page after login, a glance at the policy, the rounds and the tokens."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from accounts.access import PUBLISHER
from accounts.roles import has_role
from accounts.selectors import runtime_token_list
from engine.round.react_version import read_react_version, version_meaning
from observe.selectors import rounds_overview
from policy.selectors import draft_analysis, draft_state
from policy.versions import draft_sha256, version_published


def _policy_summary() -> dict[str, Any]:
    """The draft at a glance: how many agents, which revision, how many problems."""
    state = draft_state()
    published = version_published()
    return {
        "agents": len(state.agents),
        "revision": state.revision,
        "summary": draft_analysis(state).summary(),
        "published": published,
        "unpublished": published is None or draft_sha256(state) != published.sha256,
        "react": _react_assumption(),
    }


def _react_assumption() -> dict[str, Any]:
    """Which react agent the instance's predictions assume (issue 37 §0) and what that means."""
    raw = settings.TRAITDECK_REACT_AGENT_VERSION
    version, known = read_react_version(raw)
    return {"version": version, "meaning": version_meaning(version), "known": known, "raw": raw}


def overview(request: HttpRequest) -> HttpResponse:
    """The first page after login: what exists in this instance right now."""
    return render(
        request,
        "accounts/overview.html",
        {
            # Token names and scopes are for publishers (who manage them), not every viewer.
            "tokens": runtime_token_list() if has_role(request.user, PUBLISHER) else [],
            "policy": _policy_summary(),
            "rounds": rounds_overview(timezone.now()),
        },
    )
