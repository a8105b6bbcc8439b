"""An agent's regression suite in the browser (issue 13): its cases with what the draft gets for
each, save a recorded or playground round as a case, remove one, download and import the suite
as YAML.

``GET`` shows the page (``?download=1``: the suite as YAML); ``POST`` with ``op=add`` saves a
case (fields ``name`` and ``round``: the round's JSON), ``op=remove`` removes case ``name``,
``op=import`` replaces the suite with the YAML of ``suite`` (text) or ``file``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.json_limits import NotJson, decode_json
from core.text import counted
from policy.domain.suites import SuiteError, dump_suite, load_suite
from policy.selectors import draft_state
from policy.suites import CaseRefused, case_remove, case_save, suite_check, suite_of, suite_replace
from policy.views.agents import require_agent

SUITE_TEMPLATE = "policy/suite.html"
#: A suite file imported in the browser is at most this large.
SUITE_MAX_BYTES = 2 * 1024 * 1024


def _page(request: HttpRequest, agent: str, *, status: int = 200, **extra: Any) -> HttpResponse:
    suite = suite_of(agent)
    checked = suite_check(agent)
    results = {r.name: r for r in checked.results}
    rows = [{"case": case, "result": results.get(case.name)} for case in suite.cases]
    context = {
        "agent": agent,
        "rows": rows,
        "missing": checked.missing,
        "failing": len(checked.failing),
        "react_version": checked.react_version,
        **extra,
    }
    return render(request, SUITE_TEMPLATE, context, status=status)


@require_http_methods(["GET", "POST"])
def suite_view(request: HttpRequest, agent: str) -> HttpResponse:
    require_agent(draft_state(), agent)
    if request.method == "GET":
        if request.GET.get("download"):
            response = HttpResponse(
                dump_suite(suite_of(agent)), content_type="application/yaml; charset=utf-8"
            )
            response["Content-Disposition"] = f'attachment; filename="suite-{agent}.yaml"'
            return response
        return _page(request, agent)
    op = request.POST.get("op", "")
    if op == "add":
        return _add(request, agent)
    if op == "remove":
        name = request.POST.get("name", "")
        if case_remove(agent=agent, name=name, actor=request.user):
            messages.success(request, f"Removed the case {name!r}.")
        else:
            messages.error(request, f"There is no case {name!r}: nothing was removed.")
        return redirect("policy:suite", agent=agent)
    if op == "import":
        return _import(request, agent)
    return _page(request, agent, status=400, refusal="Unknown action: nothing was changed.")


def _add(request: HttpRequest, agent: str) -> HttpResponse:
    raw = request.POST.get("round", "")
    try:
        round_data = decode_json(raw.encode("utf-8", "surrogatepass"))
    except NotJson as exc:
        return _page(
            request, agent, status=422, refusal=f"The round is not JSON ({exc}): nothing saved."
        )
    if not isinstance(round_data, dict):
        return _page(request, agent, status=422, refusal="The round is a JSON object.")
    try:
        case = case_save(
            agent=agent,
            name=request.POST.get("name", ""),
            round_data=round_data,
            actor=request.user,
        )
    except CaseRefused as exc:
        return _page(request, agent, status=422, refusal=f"{exc} Nothing was saved.")
    messages.success(
        request,
        f"Saved the case {case.name!r}: it pins what the draft gets for its "
        f"{counted(len(case.expect), 'action')}. Every change of the draft is checked against it.",
    )
    return redirect("policy:suite", agent=agent)


def _import(request: HttpRequest, agent: str) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is not None:
        if upload.size is not None and upload.size > SUITE_MAX_BYTES:
            return _page(request, agent, status=413, refusal="The suite file is too large.")
        text: str | bytes = upload.read()
    else:
        text = request.POST.get("suite", "")
    try:
        suite = load_suite(text)
        suite_replace(agent=agent, data=suite.as_dict(), actor=request.user)
    except SuiteError as exc:
        return _page(request, agent, status=422, refusal=f"The suite cannot be imported: {exc}.")
    messages.success(
        request, f"Imported {counted(len(suite.cases), 'case')}: the suite was replaced."
    )
    return redirect("policy:suite", agent=agent)
