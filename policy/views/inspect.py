"""Read-only views of one agent: effective traits, the catalog preview and the dry-run playground.

All three predict the runtime from the draft through the same domain code as the API and the
``traitdeck`` CLI, so the browser, the API and the CLI agree byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from engine.catalog.catalog import COMPACT_OMITS, catalog_preview, render_value
from engine.catalog.multi_action import CATALOG_DETAILS
from engine.document.jsonable import json_text
from engine.round.dryrun import RoundSpecError, dry_run, parse_round_spec
from engine.round.overseer import DEFAULT_MAX_ACTIONS, FINAL_ACTIONS
from engine.round.react_version import REACT_VERSIONS, VersionSources, react_version
from engine.tools.resolution import AgentResolution, EffectiveTool
from engine.traits.builtins import DEFAULT_ROLE
from engine.traits.traits import normalize_traits, resolved_strategy
from policy.domain.validation.tools_unknown import unseen_tools
from policy.selectors import (
    agent_prediction,
    agent_resolution,
    beyond_first_page,
    draft_state,
    dry_run_mode,
    dry_run_version,
    role_param,
)
from web.rendering import render_page


def _resolution(agent: str, role: str | None = DEFAULT_ROLE) -> AgentResolution:
    return agent_resolution(draft_state(), agent, role=role)


# --- effective traits ---------------------------------------------------------------------


@dataclass(frozen=True)
class TraitRow:
    key: str
    value: str
    provenance: str

    @property
    def layer(self) -> str:
        """``config`` / ``manifest`` / ``builtin``: the first word of the provenance."""
        return self.provenance.partition(" ")[0]


@dataclass(frozen=True)
class ToolRow:
    tool: EffectiveTool
    traits: list[TraitRow]
    design: list[tuple[str, Any]]
    overrides: list[tuple[str, str]]


def _tool_row(tool: EffectiveTool) -> ToolRow:
    provenance = {str(key): origin for key, origin in tool.provenance.items()}
    traits = [
        TraitRow(str(key), render_value(value), provenance.get(str(key), ""))
        for key, value in normalize_traits(tool.traits).items()
    ]
    design = [(str(key), value) for key, value in tool.execution_design.items()]  # |words shows it
    overrides = [
        (str(namespace), _traits_text(override))
        for namespace, override in tool.namespace_overrides.items()
    ]
    return ToolRow(tool=tool, traits=traits, design=design, overrides=overrides)


def _traits_text(traits: Mapping[str, Any]) -> str:
    # An override replaces the whole mapping: one without strategy makes the tool unknown.
    normalized = normalize_traits(traits)
    normalized.setdefault("strategy", list(resolved_strategy(traits)))
    return "; ".join(f"{key}: {render_value(value)}" for key, value in normalized.items())


def effective_view(request: HttpRequest, agent: str) -> HttpResponse:
    """Each tool (configured, then built-in) with its traits and where every trait key came from."""
    role = role_param(request.GET.get("role"))
    resolution = _resolution(agent, role)
    rows = [_tool_row(tool) for tool in resolution.tools]
    return render_page(
        request,
        "policy/effective.html",
        {
            "agent": resolution.agent,
            "configured": [row for row in rows if not row.tool.builtin],
            "builtins": [row for row in rows if row.tool.builtin],
            "unseen": [entry.as_json() for entry in unseen_tools(resolution)],
            "role": role or "none",
        },
    )


# --- catalog preview ----------------------------------------------------------------------


def catalog_view(request: HttpRequest, agent: str) -> HttpResponse:
    """The exact catalog text the model reads (the same bytes as the API's text catalog), in the
    form ``?detail=`` asks for (``full`` or ``compact``), else the one the agent reads by
    default."""
    role = role_param(request.GET.get("role"))
    state = draft_state()
    resolution = agent_resolution(state, agent, role=role)
    asked = request.GET.get("detail")
    preview = catalog_preview(
        state.data, agent, resolution.listing, detail=asked if asked in CATALOG_DETAILS else None
    )
    hidden = set(beyond_first_page(resolution.agent))
    return render_page(
        request,
        "policy/catalog.html",
        {
            "agent": resolution.agent,
            "catalog": preview.document(),
            "preview": preview,
            "details": CATALOG_DETAILS,
            "omitted": COMPACT_OMITS,
            "tool_count": len(resolution.tools),
            "role": role or "none",
            "unseen": [t.tool_id for t in resolution.tools if t.tool_id in hidden],
        },
    )


# --- playground ---------------------------------------------------------------------------

MAX_ATTEMPTS: Final = 5
MAX_ACTIONS_PER_ATTEMPT: Final = 12
_ACTION_FIELD = re.compile(r"^a(\d{1,3})-(\d{1,3})-(tool|params)$")
_OP = re.compile(
    r"^(run|add-attempt|add-action|remove-action|remove-attempt|up|down)(?::(\d+))?(?::(\d+))?$"
)


@dataclass
class ComposedAction:
    """One action row of the form: ``choice`` is a tool id, ``complete`` or ``exit``; ``params``
    is the raw JSON text (blank: the action carries no params)."""

    choice: str
    params: str = "{}"
    error: str = ""

    @property
    def is_final(self) -> bool:
        return self.choice in FINAL_ACTIONS

    def spec(self) -> dict[str, Any]:
        """The action as ``traitdeck dry-run`` reads it from R.json (call ``check`` first).

        For a final answer the text box holds the answer: empty sends none (the runtime then
        rejects it as ``final_answer_required``), JSON (the box's ``{}`` default) sends a
        placeholder answer, any other text is the answer."""
        if self.is_final:
            entry: dict[str, Any] = {"action": self.choice}
            text = self.params.strip()
            if text:
                entry["final_answer"] = "(the final answer)" if _is_json(text) else text
            return entry
        entry = {"action": "call_tool", "tool_id": self.choice}
        if self.params.strip():
            entry["params"] = json.loads(self.params)
        return entry

    def check(self) -> bool:
        if not self.choice:
            self.error = "Pick a tool, complete or exit."
            return False
        if not self.params.strip() or self.is_final:
            return True
        try:
            json.loads(self.params)
        except (ValueError, RecursionError) as exc:
            where = (
                f" (line {exc.lineno}, column {exc.colno})"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            self.error = (
                f"The params are not valid JSON{where}: write an object such as "
                '{"query": "x"}, {} for no parameters, or leave it empty to send none.'
            )
            return False
        return True


@dataclass
class Composition:
    """The round being composed, as the form holds it (strings, so it re-renders as typed)."""

    turn_id: str = "turn-1"
    iteration: str = "0"
    max_actions: str = ""
    attempts: list[list[ComposedAction]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    #: The round's ``exec_code_complete`` (issue 37 §5): ``False`` only when the form says the
    #: code channel did not stream complete.
    exec_code_complete: bool = True

    @classmethod
    def from_post(cls, data: Any) -> Composition:
        rows: dict[int, dict[int, dict[str, str]]] = {}
        for name in data:
            match = _ACTION_FIELD.match(name)
            if match:
                attempt, index, part = int(match[1]), int(match[2]), match[3]
                rows.setdefault(attempt, {}).setdefault(index, {})[part] = data.get(name, "")
        raw_count = data.get("attempt_count", "")
        count = int(raw_count) if re.fullmatch(r"\d{1,2}", raw_count) else len(rows)
        count = max(1, min(count, MAX_ATTEMPTS))
        attempts = [
            [
                ComposedAction(choice=row.get("tool", "").strip(), params=row.get("params", ""))
                for _, row in sorted(rows.get(number, {}).items())
            ][:MAX_ACTIONS_PER_ATTEMPT]
            for number in range(count)
        ]
        return cls(
            turn_id=data.get("turn_id", ""),
            iteration=data.get("iteration", "").strip(),
            max_actions=data.get("max_actions", "").strip(),
            attempts=attempts,
            exec_code_complete=data.get("exec_code_complete", "true") != "false",
        )

    def apply(self, op: str, default_choice: str) -> None:
        """Change the composition as a form button asks (add, remove, reorder, retry)."""
        match = _OP.match(op)
        if match is None:
            return
        name = match[1]
        a = int(match[2]) if match[2] is not None else 0
        i = int(match[3]) if match[3] is not None else 0
        if name == "add-attempt":
            if len(self.attempts) < MAX_ATTEMPTS:
                # A provider retry re-streams the first attempt: copy it, then reorder it.
                first = self.attempts[0] if self.attempts else []
                self.attempts.append([ComposedAction(x.choice, x.params) for x in first])
            return
        if name == "remove-attempt":
            if 0 < a < len(self.attempts):  # the first attempt is the round itself: it stays
                del self.attempts[a]
            return
        if a >= len(self.attempts):
            return
        actions = self.attempts[a]
        if name == "add-action" and len(actions) < MAX_ACTIONS_PER_ATTEMPT:
            actions.append(ComposedAction(default_choice))
        elif name == "remove-action" and i < len(actions):
            del actions[i]
        elif name == "up" and 0 < i < len(actions):
            actions[i - 1], actions[i] = actions[i], actions[i - 1]
        elif name == "down" and i + 1 < len(actions):
            actions[i], actions[i + 1] = actions[i + 1], actions[i]

    def round_spec(self) -> dict[str, Any] | None:
        """The R.json of ``traitdeck dry-run``, or ``None`` with messages on the bad fields."""
        self.errors = {}
        # Check every action (not just up to the first bad one): each shows its own message.
        checked = [action.check() for attempt in self.attempts for action in attempt]
        ok = all(checked)
        if not self.turn_id.strip():
            self.errors["turn_id"] = "Give a turn id (any text, e.g. turn-1)."
        iteration = _whole_number(self.iteration)
        if iteration is None or iteration < 0:
            self.errors["iteration"] = "The iteration is a whole number, 0 or more."
        max_actions = _whole_number(self.max_actions) if self.max_actions else None
        if self.max_actions and max_actions is None:
            self.errors["max_actions"] = "The cap is a whole number (leave it empty for 2)."
        if not ok or self.errors:
            return None
        spec: dict[str, Any] = {"turn_id": self.turn_id, "iteration": iteration}
        if max_actions is not None:
            spec["max_actions"] = max_actions
        spec["attempts"] = [[action.spec() for action in attempt] for attempt in self.attempts]
        if not self.exec_code_complete:
            spec["exec_code_complete"] = False
        return spec


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _whole_number(text: str) -> int | None:
    return int(text) if re.fullmatch(r"-?\d{1,9}", text) else None


def _default_choice(resolution: AgentResolution, wanted: str | None) -> str:
    ids = [tool.tool_id for tool in resolution.tools]
    if wanted in ids:
        return str(wanted)
    configured = [tool.tool_id for tool in resolution.tools if not tool.builtin]
    return (configured or ids or ["complete"])[0]


def playground(request: HttpRequest, agent: str) -> HttpResponse:
    """Compose a round from the agent's tools and run it through ``traitdeck dry-run``'s engine.

    Every button posts the whole form (htmx: one round trip, the workspace is swapped; without
    JavaScript: a normal form post). ``op`` says what to do: run, or change the composition.
    """
    # Agent pages are reached from the draft's agents (404 for others); the dry-run JSON names
    # the agent resolved to, as the CLI's and the API's do.
    _resolution(agent)
    run = agent_prediction(draft_state(), agent)
    resolution = run.resolution
    default_choice = _default_choice(resolution, request.GET.get("tool"))
    result: dict[str, Any] | None = None
    round_json = ""
    case_json = ""
    status = 200
    if request.method == "POST":
        composition = Composition.from_post(request.POST)
        op = request.POST.get("op", "run")
        if op == "run":
            spec = composition.round_spec()
            if spec is None:
                status = 422
            else:
                round_json = json.dumps(spec, indent=2, ensure_ascii=False)
                try:
                    parsed = parse_round_spec(spec)
                except RoundSpecError as exc:  # the CLI's own check has the last word
                    composition.errors["round"] = f"The round is malformed: {exc}."
                    status = 422
                else:
                    mode = dry_run_mode(
                        draft_state(),
                        agent,
                        parsed,
                        mode=_chosen_mode(request) or None,
                        profile=None,
                    )
                    version, source = dry_run_version(parsed, _chosen_version(request))
                    result = {
                        **dry_run(
                            parsed,
                            resolution,
                            multi_action_mode=mode,
                            react_version=version,
                            version_source=source,
                        ),
                        "resolved_agent": run.resolved_agent,
                    }
                    # A saved case keeps the mode the round ran with.
                    case_json = json.dumps({**spec, "multi_action_mode": mode}, ensure_ascii=False)
        else:
            composition.apply(op, default_choice)
    else:
        composition = Composition(attempts=[[ComposedAction(default_choice)]])
    context = {
        "agent": resolution.agent,
        "composition": composition,
        "multi_action_mode": _chosen_mode(request) if request.method == "POST" else "",
        "react_version": (_chosen_version(request) or "") if request.method == "POST" else "",
        "react_versions": REACT_VERSIONS,
        "default_version": react_version(
            VersionSources(setting=settings.TRAITDECK_REACT_AGENT_VERSION)
        )[0],
        "known_modes": KNOWN_MODES,
        "default_mode": settings.TRAITDECK_MULTI_ACTION_MODE,
        "configured_ids": [t.tool_id for t in resolution.tools if not t.builtin],
        "builtin_ids": [t.tool_id for t in resolution.tools if t.builtin],
        "known_ids": {t.tool_id for t in resolution.tools},
        "result": result,
        "result_json": json_text(result) if result is not None else "",
        "round_json": round_json,
        "case_json": case_json,
        "default_cap": DEFAULT_MAX_ACTIONS,
        "max_attempts": MAX_ATTEMPTS,
        "max_actions_per_attempt": MAX_ACTIONS_PER_ATTEMPT,
    }
    if request.method == "POST" and getattr(
        request, "htmx", False
    ):  # one round trip: swap the workspace only
        return render(request, "policy/playground.html#workspace", context, status=status)
    return render_page(request, "policy/playground.html", context, status=status)


#: The ``multi_action_mode`` values the runtime knows (on: ``MULTI_ACTION_ON``), offered as a
#: select; any other string is "other" (the runtime reads it as off).
KNOWN_MODES = ("off", "on", "safe_fanout", "fanout", "true", "yes", "1")
OTHER_MODE = "__other__"


def _chosen_version(request: HttpRequest) -> str | None:
    """The react agent the playground's select names (``""``: the server's setting)."""
    chosen = request.POST.get("react_version", "").strip().lower()
    return chosen if chosen in REACT_VERSIONS else None


def _chosen_mode(request: HttpRequest) -> str:
    """The mode the playground's select names, or the "other" text beside it."""
    chosen = request.POST.get("multi_action_mode", "")
    if chosen == OTHER_MODE:
        return request.POST.get("multi_action_mode_other", "").strip()
    return chosen


def glossary_view(request: HttpRequest) -> HttpResponse:
    """The words the pages use, one line each (pages link their terms here)."""
    return render(request, "policy/glossary.html")
