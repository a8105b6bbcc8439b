from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from accounts.selectors import runtime_token_list
from observe.selectors import rounds_overview
from policy.selectors import draft_analysis, draft_state


def _policy_summary() -> dict[str, Any]:
    """The draft at a glance: how many agents, which revision, how many problems."""
    state = draft_state()
    return {
        "agents": len(state.agents),
        "revision": state.revision,
        "summary": draft_analysis(state).summary(),
    }


def overview(request: HttpRequest) -> HttpResponse:
    """The first page after login: what exists in this instance right now."""
    return render(
        request,
        "accounts/overview.html",
        {
            "tokens": runtime_token_list(),
            "policy": _policy_summary(),
            "rounds": rounds_overview(timezone.now()),
        },
    )
