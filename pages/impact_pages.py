"""What a policy change does to recorded rounds: the impact page, one round side by side, the
publish page and the rollback review (which show what publishing would change). Each replays
observe's rounds under policy sides, so these pages compose the policy and observe apps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from core.numbers import parse_whole
from core.text import counted
from core.vocabulary import EXPLORATION
from engine.catalog.multi_action import multi_action_mode
from engine.document.diagnostics import Severity
from engine.replay.draft_impact import (
    LABELS,
    RISK_ORDER,
    changes,
    impact_groups,
    outcomes,
    parse_recorded_round,
)
from engine.round.dryrun import dry_run
from engine.round.react_version import VersionSources, react_version
from engine.traits.round_policy import RoundPolicy
from engine.traits.traits import resolved_strategy
from observe.domain.rounds import recorded_round
from observe.live import known_agents, parse_filter
from observe.recorded_impact import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    SideError,
    policy_impact,
    policy_side,
    side_policy,
)
from observe.selectors import RoundFilter, round_get, round_ids_in_path, round_ids_query, round_url
from pages.versions import diff_context
from policy.selectors import DraftState, draft_analysis, draft_state
from policy.services import StaleRevision
from policy.suites import failing_summary, suites_check
from policy.versions import (
    ConfirmationNeeded,
    PublishRefused,
    SuitesFailing,
    draft_sha256,
    policy_publish,
    policy_rollback,
    version_data,
    version_get,
    version_list,
    version_published,
)
from policy.views.common import base_revision

ROLLBACK_TEMPLATE = "policy/rollback.html"


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
    kind: str = "",
    tool: str = "",
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
    return {
        "report": report,
        "candidate": candidate,
        "baseline": baseline,
        "shown": rows,
        "groups": _groups(report, sides, kind=kind, tool=tool, reads_only=_reads_only(candidate)),
        "kind": kind,
        "tool": tool,
        "kinds": [(k, LABELS[k]) for k in RISK_ORDER if report.totals[k]],
    }


#: Rows of a group shown before its "show more".
GROUP_FIRST = 10


def _reads_only(side: Any) -> Callable[[str, str], bool]:
    """Whether a tool only reads (strategy exactly ``exploration``) under ``side``'s policy of an
    agent, asked once per (agent, tool)."""
    known: dict[tuple[str, str], bool] = {}

    def check(agent: str, tool_id: str) -> bool:
        key = (agent, tool_id)
        if key not in known:
            found, _mode = side_policy(side, agent)
            policy = found if isinstance(found, RoundPolicy) else RoundPolicy.of(found.tools)
            known[key] = resolved_strategy(policy.traits(tool_id)) == (EXPLORATION,)
        return known[key]

    return check


def _groups(
    report: Any, sides: str, *, kind: str, tool: str, reads_only: Callable[[str, str], bool]
) -> list[dict[str, Any]]:
    """The report's changes by kind, riskiest first, filtered by kind and tool (substring),
    each row with its round's links; the first rows of a group apart from the rest."""

    urls: dict[int, tuple[str, str]] = {}
    out = []
    for group in impact_groups(report.affected, reads_only=reads_only):
        if kind and group.kind != kind:
            continue
        rows = []
        for impact, change in group.items:
            if tool and tool.lower() not in (change.tool_id or "").lower():
                continue
            if id(impact) not in urls:
                urls[id(impact)] = (round_url(impact), _compare_url(impact, sides))  # type: ignore[arg-type]
            url, compare = urls[id(impact)]
            rows.append({"round": impact, "change": change, "url": url, "compare_url": compare})
        if rows:
            out.append(
                {
                    "group": group,
                    "first": rows[:GROUP_FIRST],
                    "rest": rows[GROUP_FIRST:],
                    "count": len(rows),
                }
            )
    return out


def _compare_url(impact: Any, sides: str) -> str:
    """The side-by-side page of an affected round (its ids in the query when no path can hold
    them, as ``round_url``)."""

    if round_ids_in_path(impact.agent, impact.turn_id):
        path = reverse(
            "policy:impact-round",
            kwargs={
                "agent": impact.agent,
                "turn_id": impact.turn_id,
                "iteration": impact.iteration,
            },
        )
        return f"{path}?{sides}"
    ids = round_ids_query(impact.agent, impact.turn_id, impact.iteration)
    return f"{reverse('policy:impact-round-by-ids')}?{ids}&{sides}"


def impact_round_by_ids(request: HttpRequest) -> HttpResponse:
    """The side-by-side page, its ids in the query string (``_compare_url``)."""
    iteration = parse_whole(request.GET.get("iteration", ""))
    if iteration is None:
        raise Http404("No round with this agent, turn and iteration.")
    agent, turn_id = request.GET.get("agent", ""), request.GET.get("turn_id", "")
    return impact_round_view(request, agent=agent, turn_id=turn_id, iteration=iteration)


def _filters(request: HttpRequest) -> dict[str, str]:
    """The impact card's filters (``?impact_kind=``, ``?impact_tool=``)."""
    return {
        "kind": request.GET.get("impact_kind", "")[:40],
        "tool": request.GET.get("impact_tool", "")[:200],
    }


def _publish_impact(request: HttpRequest) -> dict[str, Any] | None:
    """What publishing the draft would change in the newest 1,000 recorded rounds."""

    try:
        found = _impact_context(
            "draft", "published", limit=DEFAULT_WINDOW, shown=20, **_filters(request)
        )
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
    chunk = parse_whole(raw_chunk) or IMPACT_STEP
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
    limit = parse_whole(raw_limit)
    if limit is None or not 1 <= limit <= MAX_WINDOW:
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
            **_filters(request),
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
        "impact": _publish_impact(request),
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
            context["refusal_at"] = "override_failing_cases"
            context["needs_override"] = True
            # The cases the refusal ran (under the draft it locked): not run a second time.
            context["failing_cases"] = exc.failing
            status = 422
        except ConfirmationNeeded as exc:
            context["refusal"] = str(exc)
            context["refusal_at"] = "confirm_warnings"
            context["needs_confirmation"] = True
            status = 422
        except PublishRefused as exc:
            context["refusal"] = str(exc)
            # Shown beside the control that caused it (the page is long: the top is far away).
            context["refusal_at"] = "message" if not message.strip() else None
            status = 422
        else:
            messages.success(request, f"Published version {created.number}: runtimes now fetch it.")
            return redirect("policy:version", number=created.number)
    if "failing_cases" not in context:
        context["failing_cases"] = failing_summary(suites_check(state))
    return render(request, "policy/publish.html", context, status=status)


def _rollback_impact(number: int, request: HttpRequest) -> dict[str, Any] | None:
    """What putting version ``number`` back in force would change in the newest recorded
    rounds (against the version in force)."""

    try:
        found = _impact_context(
            str(number), "published", limit=DEFAULT_WINDOW, shown=20, **_filters(request)
        )
    except SideError:
        return None
    return {
        **found,
        "page_url": reverse("policy:impact") + f"?baseline=published&candidate={number}",
    }


def _rollback_failing(number: int) -> list[str]:
    """The regression cases that fail under version ``number``."""
    found = version_get(number)
    if found is None:
        return []
    return failing_summary(suites_check(DraftState(data=version_data(found), revision=0, text="")))


def _rollback_context(found: Any, request: HttpRequest) -> dict[str, Any]:
    published = version_published()
    state = draft_state()
    return {
        "version": found,
        "published": published,
        "in_force": published is not None and published.number == found.number,
        "draft": state,
        "unpublished": published is None or draft_sha256(state) != published.sha256,
        "rollback_message": request.POST.get("message", ""),
        "failing_cases": _rollback_failing(found.number),
        "impact": _rollback_impact(found.number, request),
        **diff_context("published", str(found.number)),
    }


def rollback_view(request: HttpRequest, number: int) -> HttpResponse:
    """GET: the review (what is in force → this version: diff, impact on recorded rounds,
    failing regression cases); POST: publish a copy of version ``number`` once confirmed."""
    found = version_get(number)
    if found is None:
        raise Http404(f"There is no version {number}.")
    if request.method != "POST":
        return render(request, ROLLBACK_TEMPLATE, _rollback_context(found, request))
    context = _rollback_context(found, request)
    refusal = None
    if request.POST.get("confirm_rollback") != "on":
        refusal = f"Confirm that you reviewed what rolling back to version {number} changes."
    elif context["failing_cases"] and request.POST.get("override_failing_cases") != "on":
        refusal = (
            f"{counted(len(context['failing_cases']), 'regression case')}"
            f" {'fails' if len(context['failing_cases']) == 1 else 'fail'} under version {number}:"
            " tick the override to roll back anyway (the audit log records it)."
        )
    if refusal is None:
        try:
            created = policy_rollback(
                actor=request.user,
                number=number,
                message=request.POST.get("message", ""),
                confirm_errors=request.POST.get("confirm_errors") == "on",
                confirm_unpublished=request.POST.get("confirm_unpublished") == "on",
                overridden_cases=context["failing_cases"],
            )
        except (ConfirmationNeeded, PublishRefused) as exc:
            refusal = str(exc)
            context["confirm_errors"] = isinstance(exc, ConfirmationNeeded) and "error" in str(exc)
        else:
            messages.success(
                request,
                f"Rolled back: version {created.number} is a copy of version {number} and is in"
                " force; the draft is set to it.",
            )
            return redirect("policy:version", number=created.number)
    context["rollback_refusal"] = refusal
    context["confirm_errors"] = (
        context.get("confirm_errors") or request.POST.get("confirm_errors") == "on"
    )
    return render(request, ROLLBACK_TEMPLATE, context, status=422)


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
    # As the impact card: the react agent the round's round.started named, else the setting.
    version, version_source = react_version(
        VersionSources(spec.react_version, setting=settings.TRAITDECK_REACT_AGENT_VERSION)
    )
    results = []
    for side in (baseline, candidate):
        policy, mode = side_policy(side, agent)
        chosen = multi_action_mode(spec.multi_action_mode, mode)
        results.append(
            dry_run(
                spec,
                policy,
                multi_action_mode=chosen,
                react_version=version,
                version_source=version_source,
            )
        )
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
        "react": (version, version_source),
    }
    return render(request, "policy/impact_round.html", context)
