"""Editing one tool's traits and execution design, with diagnostics while the admin types.

``tool_preview`` applies the form to a copy of the draft (nothing is saved), validates the result
and answers with the diagnostics of that one tool: one round trip per pause in typing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from core.vocabulary import EARLY_PROFILE, UNKNOWN
from engine.document.diagnostics import Diagnostic, sort_by_severity_and_risk
from engine.tools.connections import WILDCARD
from engine.tools.resolution import EffectiveTool, resolve_agent
from engine.traits.traits import is_early, resolved_strategy
from policy.audit_notes import tool_edited
from policy.domain.edits import DESIGN_FIELDS, EditError
from policy.domain.placement import Placement, place
from policy.domain.tool_edit import ToolTarget, UnknownToolError, find_tool
from policy.domain.yaml_io import CLI_MAX_BYTES, export_text
from policy.forms import ToolForm
from policy.selectors import (
    DraftState,
    agent_placement,
    agent_resolution,
    draft_state,
    manifest_for,
    text_analysis,
)
from policy.services import StaleRevision
from policy.views.agents import show_agent
from policy.views.common import (
    apply_edit,
    conflict_context,
    page_url,
    problem,
    submitted_input,
)
from web.rendering import HtmxHttpRequest, render_page

TOOL_TEMPLATE = "policy/tool_form.html"


def _target(
    state: DraftState, agent: str, index: int, key: str, namespace: str | None
) -> ToolTarget:
    try:
        return find_tool(agent_resolution(state, agent), index, key, namespace)
    except UnknownToolError as exc:
        raise Http404(str(exc)) from None


def _namespace(request: HtmxHttpRequest) -> str | None:
    return request.GET.get("namespace") or None


def _inherited(target: ToolTarget, traits: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Trait keys a lower layer (code, manifest, built-in) supplies and this entry does not set:
    what the runtime reads when the form leaves them out."""
    if target.tool is None or target.namespace is not None:
        return []
    own = traits or {}
    return [
        (str(key), target.tool.provenance.get(key, ""))
        for key in target.tool.traits
        if key not in own and not str(target.tool.provenance.get(key, "")).startswith("config")
    ]


def _context(
    state: DraftState, target: ToolTarget, form: ToolForm, diagnostics: tuple[Diagnostic, ...]
) -> dict[str, Any]:
    traits, design = target.entries(state.data)
    traits = traits or {}
    execution = traits.get("execution")
    inherited = _inherited(target, traits)
    query = "?" + urlencode({"namespace": target.namespace}) if target.namespace else ""
    args = [target.agent, target.index, target.key]
    return {
        "state": state,
        "base_revision": state.revision,
        "agent": target.agent,
        "target": target,
        "form": form,
        "diagnostics": diagnostics,
        "show_empty": True,
        "save_url": reverse("policy:tool-edit", args=args) + query,
        "preview_url": reverse("policy:tool-preview", args=args) + query,
        "agent_url": reverse("policy:agent", args=[target.agent]),
        "extension_keys": [
            (str(k), v) for k, v in traits.items() if k not in ("strategy", "execution")
        ],
        "execution_extras": [
            (str(k), v)
            for k, v in (execution.items() if isinstance(execution, Mapping) else ())
            if k not in EARLY_PROFILE
        ],
        "strategy_as_written": traits.get("strategy") if "strategy" in traits else None,
        "inherited": inherited,
        "inherited_strategy": any(key == "strategy" for key, _ in inherited),
        "early_profile": list(EARLY_PROFILE.items()),
        "design_extras": [(str(k), v) for k, v in (design or {}).items() if k not in DESIGN_FIELDS],
        "summary": _summary(target.tool, target.namespace),
    }


def _summary(tool: EffectiveTool | None, namespace: str | None) -> dict[str, Any] | None:
    """What the runtime will read for the tool: its strategy and whether it starts early."""
    if tool is None:
        return None
    traits = tool.traits_for({"namespace": namespace}) if namespace else tool.traits
    strategy = resolved_strategy(traits)
    return {
        "strategy": strategy,
        "runs_alone": strategy == (UNKNOWN,),
        "early": is_early(traits),
    }


def _draft_diagnostics(state: DraftState, target: ToolTarget) -> tuple[Diagnostic, ...]:
    placement = agent_placement(state, agent_resolution(state, target.agent))
    if target.name == WILDCARD:
        found = placement.for_connection_tools(target.index)
    else:
        found = placement.for_tool(target.index, target.name)
    return tuple(sort_by_severity_and_risk(found))


def _draft_diagnostics_everywhere(state: DraftState, target: ToolTarget) -> tuple[Diagnostic, ...]:
    return agent_placement(state, agent_resolution(state, target.agent)).everything()


def save_would_show(
    after: Placement, index: int, name: str, before: tuple[Diagnostic, ...]
) -> list[Diagnostic]:
    """Every diagnostic the save will produce, the riskiest first: the tool's own; for a
    wildcard entry (it applies to every tool of the connection) those of each tool of the
    connection; and any the edit would add elsewhere in the agent."""
    own = after.for_connection_tools(index) if name == WILDCARD else after.for_tool(index, name)
    seen = {(d.code, d.path, d.message) for d in own}
    known = {(d.code, d.path, d.message) for d in before}
    elsewhere = [d for d in after.everything() if (d.code, d.path, d.message) not in known | seen]
    return sort_by_severity_and_risk([*own, *elsewhere])


@require_http_methods(["GET", "POST"])
def tool_edit(request: HtmxHttpRequest, agent: str, index: int, key: str) -> HttpResponse:
    state = draft_state()
    target = _target(state, agent, index, key, _namespace(request))
    traits, design = target.entries(state.data)
    if request.method == "GET":
        initial = ToolForm.initial_from(traits or {}, design or {})
        suggested = ToolForm.suggested(request.GET, with_design=target.with_design)
        form = ToolForm(
            traits=traits,
            design=design,
            with_design=target.with_design,
            initial={**initial, **suggested},
        )
        context = _context(state, target, form, _draft_diagnostics(state, target))
        if suggested:
            # Filled in from a link (tool health advice): nothing is saved until Save.
            context["suggested"] = [
                (name, initial.get(name), value) for name, value in suggested.items()
            ]
            context["save_state"] = "unsaved"
            # The tool's health panel says what the suggested limit does to its recorded calls.
            context["health_timeout"] = suggested.get("timeout_s")
        return render_page(request, TOOL_TEMPLATE, context)
    form = ToolForm(request.POST, traits=traits, design=design, with_design=target.with_design)
    if not form.is_valid():
        context = _context(state, target, form, _draft_diagnostics(state, target))
        # The check panel must not say "No problems found" beside a field error.
        context["form_errors"] = [str(e) for errors in form.errors.values() for e in errors]
        context["save_state"] = "not-saved"
        template = f"{TOOL_TEMPLATE}#tool-editor" if request.htmx else TOOL_TEMPLATE
        return render(request, template, context, status=422)
    # Saving a tool with errors is allowed: the agent page keeps showing them on its row.
    edit = target.edit(form.traits, form.design)

    def on_conflict(exc: StaleRevision) -> HttpResponse:
        # The editor again, holding the user's input, beside the tool as the draft has it now.
        now = draft_state()
        try:
            now_target = _target(now, agent, index, key, _namespace(request))
        except Http404:
            return problem(
                request,
                f"{exc} The tool is not in the draft any more.",
                status=409,
                conflict=conflict_context(
                    exc, current=None, yours=submitted_input(request), what=target.tool_id
                ),
            )
        now_traits, now_design = now_target.entries(now.data)
        current = {"tool_traits": now_traits, "tool_execution": now_design}
        context = _context(now, now_target, form, _draft_diagnostics(now, now_target))
        context["conflict"] = conflict_context(
            exc, current=current, yours=submitted_input(request), what=target.tool_id
        )
        context["reload_url"] = page_url(request)
        template = f"{TOOL_TEMPLATE}#tool-editor" if request.htmx else TOOL_TEMPLATE
        return render(request, template, context, status=409)

    return apply_edit(
        request,
        edit,
        lambda new: show_agent(request, new, agent, saved=target.tool_id),
        audit=tool_edited(target),
        on_conflict=on_conflict,
    )


@require_POST
def tool_preview(request: HtmxHttpRequest, agent: str, index: int, key: str) -> HttpResponse:
    """The tool's diagnostics as if the form were saved (nothing is stored)."""
    state = draft_state()
    target = _target(state, agent, index, key, _namespace(request))
    traits, design = target.entries(state.data)
    form = ToolForm(request.POST, traits=traits, design=design, with_design=target.with_design)
    context: dict[str, Any] = {
        "show_empty": True,
        "preview": True,
        "save_state": "unsaved",
        "base_revision": state.revision,
    }
    if not form.is_valid():
        context["form_errors"] = [str(e) for errors in form.errors.values() for e in errors]
        return render(request, f"{TOOL_TEMPLATE}#tool-diagnostics", context)
    try:
        new = target.edit(form.traits, form.design)(state.data)
    except EditError as exc:
        context["form_errors"] = [str(exc)]
        return render(request, f"{TOOL_TEMPLATE}#tool-diagnostics", context)
    if new == state.data:
        # Ticked back to what the draft holds: nothing is unsaved.
        context["save_state"] = "clean"
    manifest = manifest_for(agent)
    analysis = text_analysis(export_text(new), max_bytes=CLI_MAX_BYTES)
    resolution = resolve_agent(new, agent, manifest)
    placement = place(analysis.diagnostics, agent, resolution.connections, manifest)
    tool = None if target.name == WILDCARD else resolution.find(target.tool_id)
    before = _draft_diagnostics_everywhere(state, target)
    context["diagnostics"] = save_would_show(placement, index, target.name, before)
    context["summary"] = _summary(tool, target.namespace)
    return render(request, f"{TOOL_TEMPLATE}#tool-diagnostics", context)
