"""What a policy change does to recorded rounds: the impact page, one round side by side, and the
publish page (which shows what publishing the draft would change). Each replays observe's rounds
under policy sides, so these pages compose the policy and observe apps."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from core.text import dot_segment
from observe.domain.rounds import recorded_round
from observe.impact import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    SideError,
    policy_impact,
    policy_side,
    side_policy,
)
from observe.live import known_agents, parse_filter
from observe.selectors import RoundFilter, round_get, round_url
from policy.domain.diagnostics import Severity
from policy.domain.dryrun import dry_run
from policy.domain.impact import LABELS, changes, outcomes, parse_recorded_round
from policy.domain.multi_action import multi_action_mode
from policy.selectors import draft_analysis, draft_state
from policy.services import StaleRevision
from policy.suites import failing_summary, suites_check
from policy.versions import (
    ConfirmationNeeded,
    PublishRefused,
    SuitesFailing,
    policy_publish,
    version_list,
    version_published,
)
from policy.views.common import base_revision
from policy.views.versions import diff_context

#: Affected rounds a page lists (the API lists them all).
IMPACT_SHOWN = 100
#: Rounds per request when the browser replays a larger window step by step (``?chunk=``).
IMPACT_STEP = 5000


def _impact_context(
    candidate_ref: str,
    baseline_ref: str,
    *,
    limit: int,
    shown: int,
    round_filter: Any = None,
) -> dict[str, Any]:
    """What replaying the newest ``limit`` recorded rounds (of ``round_filter``: an agent, a
    time range) under both sides changes (issue 13). Raises ``SideError`` for a side that names
    no policy."""

    candidate, baseline = policy_side(candidate_ref), policy_side(baseline_ref)
    report = policy_impact(
        candidate, baseline, round_filter=round_filter or RoundFilter(), limit=limit
    )
    sides = urlencode({"baseline": baseline.ref, "candidate": candidate.ref})
    rows = [
        {
            "round": impact,
            "url": round_url(impact),  # type: ignore[arg-type]
            "compare_url": _compare_url(impact, sides),
        }
        for impact in report.affected[:shown]
    ]
    return {"report": report, "candidate": candidate, "baseline": baseline, "shown": rows}


def _compare_url(impact: Any, sides: str) -> str:
    """The side-by-side page of an affected round (none for a turn id with dot segments)."""

    if dot_segment(impact.turn_id):
        return ""
    path = reverse(
        "policy:impact-round",
        kwargs={"agent": impact.agent, "turn_id": impact.turn_id, "iteration": impact.iteration},
    )
    return f"{path}?{sides}"


def _publish_impact() -> dict[str, Any] | None:
    """What publishing the draft would change in the newest 1,000 recorded rounds."""

    try:
        found = _impact_context("draft", "published", limit=DEFAULT_WINDOW, shown=20)
    except SideError:  # nothing published yet: nothing to compare with
        return None
    return {**found, "page_url": reverse("policy:impact") + "?baseline=published&candidate=draft"}


def impact_view(request: HttpRequest) -> HttpResponse:
    """Any two sides (``draft``, ``published`` or a version number) over the newest ``limit``
    recorded rounds."""

    candidate = request.GET.get("candidate", "draft")
    baseline = request.GET.get("baseline", "published")
    raw_limit = request.GET.get("limit", str(DEFAULT_WINDOW))
    raw_chunk = request.GET.get("chunk", "")
    chunk = int(raw_chunk) if raw_chunk.isascii() and raw_chunk.isdigit() else IMPACT_STEP
    context: dict[str, Any] = {
        "candidate_ref": candidate,
        "baseline_ref": baseline,
        "limit": raw_limit,
        "versions": version_list(),
        "max_window": MAX_WINDOW,
        # Windows larger than one step replay a step at a time in the browser (progress, cancel).
        "chunk": max(1, min(chunk, MAX_WINDOW)),
        "labels": dict(LABELS),
    }
    if not (raw_limit.isascii() and raw_limit.isdigit() and 1 <= int(raw_limit) <= MAX_WINDOW):
        context["refusal"] = f"The window is a whole number of rounds from 1 to {MAX_WINDOW:,}."
        return render(request, "policy/impact.html", context, status=422)
    if version_published() is None and "published" in (candidate.lower(), baseline.lower()):
        # Not a bad request: there is just nothing to compare with yet.
        context["note"] = "Nothing is published yet: compare the draft with a version instead."
        return render(request, "policy/impact.html", context)
    parsed = parse_filter(request.GET, full=True)
    context["round_filter"] = parsed.round_filter
    context["filter_errors"] = parsed.errors
    context["agents"] = known_agents([parsed.round_filter.agent or ""])
    try:
        context["impact"] = _impact_context(
            candidate,
            baseline,
            limit=int(raw_limit),
            shown=IMPACT_SHOWN,
            round_filter=parsed.round_filter,
        )
    except SideError as exc:
        context["refusal"] = str(exc)
        return render(request, "policy/impact.html", context, status=422)
    return render(request, "policy/impact.html", context)


def publish_view(request: HttpRequest) -> HttpResponse:
    """Review the draft against what is in force, then publish it with a message."""
    state = draft_state()
    analysis = draft_analysis(state)
    context: dict[str, Any] = {
        "draft": state,
        "summary": analysis.summary(),
        "errors": [d for d in analysis.diagnostics if d.severity is Severity.ERROR],
        "warnings": [d for d in analysis.diagnostics if d.severity is Severity.WARNING],
        "published": version_published(),
        "message": "",
        **diff_context("published", "draft"),
        "impact": _publish_impact(),
    }
    status = 200
    if request.method == "POST":
        message = request.POST.get("message", "")
        context["message"] = message
        try:
            created = policy_publish(
                actor=request.user,
                message=message,
                base_revision=base_revision(request),
                confirm_warnings=request.POST.get("confirm_warnings") == "on",
                override_failing_cases=request.POST.get("override_failing_cases") == "on",
            )
        except StaleRevision as exc:
            context["refusal"] = str(exc)
            status = 409
        except SuitesFailing as exc:
            context["refusal"] = str(exc)
            context["needs_override"] = True
            # The cases the refusal ran (under the draft it locked): not run a second time.
            context["failing_cases"] = exc.failing
            status = 422
        except ConfirmationNeeded as exc:
            context["refusal"] = str(exc)
            context["needs_confirmation"] = True
            status = 422
        except PublishRefused as exc:
            context["refusal"] = str(exc)
            status = 422
        else:
            messages.success(request, f"Published version {created.number}: runtimes now fetch it.")
            return redirect("policy:version", number=created.number)
    if "failing_cases" not in context:
        context["failing_cases"] = failing_summary(suites_check(state))
    return render(request, "policy/publish.html", context, status=status)


def impact_round_view(
    request: HttpRequest, agent: str, turn_id: str, iteration: int
) -> HttpResponse:
    """One recorded round predicted under both sides, side by side: each action's outcome under
    the baseline and under the candidate, the ones that differ marked."""

    row = round_get(agent, turn_id, iteration)
    if row is None:
        raise Http404("No round with this agent, turn and iteration.")
    found = recorded_round((row.agent, row.turn_id, row.iteration), row.assembly)
    if found is None:
        raise Http404("This round has no observed action to replay.")
    spec = parse_recorded_round(found).spec
    try:
        baseline = policy_side(request.GET.get("baseline", "published"))
        candidate = policy_side(request.GET.get("candidate", "draft"))
    except SideError as exc:
        context = {"refusal": str(exc), "row": row, "round_url": round_url(row)}
        return render(request, "policy/impact_round.html", context, status=422)
    results = []
    for side in (baseline, candidate):
        policy, mode = side_policy(side, agent)
        chosen = multi_action_mode(spec.multi_action_mode, mode)
        results.append(dry_run(spec, policy, multi_action_mode=chosen))
    before, after = outcomes(results[0]), outcomes(results[1])
    changed = {(c.attempt, c.index) for c in changes(results[0], results[1])}
    rows = [
        {
            "attempt": attempt,
            "index": index,
            "tool_id": tool_id,
            "before": before[(attempt, index)][1],
            "after": after[(attempt, index)][1],
            "changed": (attempt, index) in changed,
        }
        for (attempt, index), (tool_id, _) in sorted(before.items())
    ]
    context = {
        "row": row,
        "round_url": round_url(row),
        "baseline": baseline,
        "candidate": candidate,
        "rows": rows,
        "changed": len(changed),
        "modes": (results[0]["multi_action_mode"], results[1]["multi_action_mode"]),
    }
    return render(request, "policy/impact_round.html", context)
