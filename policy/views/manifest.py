"""An agent's manifest page: what was uploaded, which entries the policy uses, which config
overrides, which name no tool of the agent; download, replace and remove (issue 12).

``GET`` shows the page (``?download=1``: the JSON as uploaded, as a file); ``POST`` with
``op=remove`` removes the manifest; any other ``POST`` is the upload of the agent page's form.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from engine.tools.resolution import UnknownAgentError
from policy.forms import ManifestForm
from policy.selectors import agent_resolution, draft_state, manifest_rows
from policy.services import StaleRevision, manifest_remove, manifest_upload
from policy.views.agents import manifest_upload_view, require_agent
from policy.views.common import base_revision, problem
from web.rendering import HtmxHttpRequest

MANIFEST_TEMPLATE = "policy/manifest.html"


@dataclass(frozen=True)
class KeyRow:
    key: str
    value: Any
    #: "used", "overridden" (config sets this key: ``in_effect`` is what the runtime reads)
    status: str
    in_effect: Any = None
    where: str = ""


@dataclass(frozen=True)
class EntryRow:
    tool_id: str
    status: str  # "used", "overridden", "partly overridden", "unused"
    keys: tuple[KeyRow, ...]

    @property
    def status_text(self) -> str:
        return {
            "used": "used",
            "overridden": "overridden by config",
            "partly overridden": "partly overridden by config",
            "unused": "unused: no tool of this agent has this id",
        }[self.status]


def _entries(agent: str, data: Any) -> list[EntryRow]:
    state = draft_state()
    try:
        resolution = agent_resolution(state, agent)
    except UnknownAgentError:
        resolution = None
    rows = []
    for tool_id, entry in (data or {}).items():
        traits = entry.get("tool_traits", {}) if isinstance(entry, dict) else {}
        tool = resolution.find(str(tool_id)) if resolution is not None else None
        if tool is None:
            keys = tuple(KeyRow(str(k), v, "unused") for k, v in traits.items())
            rows.append(EntryRow(str(tool_id), "unused", keys))
            continue
        key_rows = []
        for key, value in traits.items():
            where = str(tool.provenance.get(key, ""))
            if where.startswith("config"):
                key_rows.append(KeyRow(str(key), value, "overridden", tool.traits.get(key), where))
            else:
                key_rows.append(KeyRow(str(key), value, "used", where=where))
        overridden = sum(row.status == "overridden" for row in key_rows)
        status = (
            "used"
            if not overridden
            else "overridden"
            if overridden == len(key_rows)
            else "partly overridden"
        )
        rows.append(EntryRow(str(tool_id), status, tuple(key_rows)))
    return rows


def _page(
    request: HtmxHttpRequest, agent: str, *, form: ManifestForm | None = None, status: int = 200
) -> HttpResponse:
    state = draft_state()
    row = manifest_rows().get(agent)
    entries = _entries(agent, row.data) if row is not None else []
    context = {
        "agent": agent,
        "manifest": row,
        "entries": entries,
        "counts": {
            status: sum(e.status == status for e in entries)
            for status in ("used", "overridden", "partly overridden", "unused")
        },
        "overridden_total": sum(e.status != "used" and e.status != "unused" for e in entries),
        "text": json.dumps(row.data, indent=2, ensure_ascii=False) if row is not None else "",
        "form": form or ManifestForm(),
        "base_revision": state.revision,
    }
    return render(request, MANIFEST_TEMPLATE, context, status=status)


@require_http_methods(["GET", "POST"])
def manifest_view(request: HtmxHttpRequest, agent: str) -> HttpResponse:
    require_agent(draft_state(), agent)
    here = reverse("policy:manifest", args=[agent])
    if request.method == "GET":
        if request.GET.get("download"):
            row = manifest_rows().get(agent)
            if row is None:
                return problem(request, f"Agent {agent} has no manifest to download.", status=404)
            body = json.dumps(row.data, indent=2, ensure_ascii=False) + "\n"
            response = HttpResponse(body, content_type="application/json; charset=utf-8")
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in agent)
            response["Content-Disposition"] = f'attachment; filename="manifest-{safe}.json"'
            return response
        return _page(request, agent)
    if request.POST.get("op") == "remove":
        revision = base_revision(request)
        if revision is None:
            return problem(
                request, "The form did not say which draft revision it edits.", status=422
            )
        try:
            removed = manifest_remove(agent=agent, base_revision=revision, user=request.user)
        except StaleRevision as exc:
            return problem(request, f"{exc} Nothing was removed.", status=409)
        messages.success(
            request,
            f"Removed the manifest of {agent}." if removed else f"{agent} had no manifest.",
        )
        return redirect(here)
    if request.POST.get("page") != "manifest":
        return manifest_upload_view(request, agent)  # the agent page's form
    form = ManifestForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, agent, form=form, status=422)
    revision = base_revision(request)
    if revision is None:
        return problem(request, "The form did not say which draft revision it edits.", status=422)
    try:
        manifest_upload(
            agent=agent,
            data=form.cleaned_data["manifest"],
            user=request.user,
            base_revision=revision,
        )
    except StaleRevision as exc:
        return problem(request, f"{exc} Nothing was stored.", status=409)
    messages.success(request, f"Replaced the manifest of {agent}.")
    return redirect(here)
