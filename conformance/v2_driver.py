"""Drive a turn through the runtime's **v2** react agent (KDCube's default, ``AI_REACT_AGENT_VERSION
= v2``) with only the model's text scripted, and report what its decision node did with each of
the model's answers (issue 37 §0).

What runs is the runtime's own: ``ReactSolverV2._decision_node`` (``solutions/react/v2/
runtime.py``) with its retry accounting (``decision_retries``, ``max_decision_retries = 2``),
``react_decision_stream_v2`` → ``workspace_streamer.stream_with_channels`` parsing the scripted
model text (``multiple_channel_instances:N``, JSON errors, the ``Action`` model),
``_validate_decision``, ``_validate_tool_call_protocol``, ``ToolSubsystem.validate_tool_params`` and
``_route_after_decision``.

Glue (the node's scaffolding, as the runtime's own ``v2/test_runtime.py`` replaces it): a model
service whose stream is the scripted text; ``retry_with_compaction`` calls the decision agent once
with one user block (no timeline to render); the announce, the delta streamers, timing and
external-event draining do nothing; a context browser that keeps the notices the node contributes
(their codes are the answer); the tool subsystem knows every adapter without a signature (so a
known tool is green, an unknown one red, as ``validate_tool_params`` says); a decision that
routes to tool execution counts as the tool having run (the tool itself is not called).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from conformance.harness import SDK, Runtime, decision_of

V2 = f"{SDK}.solutions.react.v2.runtime"


class _Log:
    def log(self, *args: Any, **kwargs: Any) -> None:
        return None


async def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def model_text(decision: Mapping[str, Any]) -> str:
    """The model's answer for one decision: ``actions`` as v2 action objects, each in its own
    ``<channel:action>`` (``shape: channels``, the default), all in one channel one after another
    (``objects``) or as one JSON list (``list``)."""
    objects = [_v2_object(a) for a in decision.get("actions", [])]
    shape = decision.get("shape", "channels")
    parts = ["<channel:thinking>deciding</channel:thinking>"]
    if shape == "channels":
        parts += [f"<channel:action>{json.dumps(o)}</channel:action>" for o in objects]
    elif shape == "objects":
        parts.append(
            "<channel:action>" + "\n".join(json.dumps(o) for o in objects) + "</channel:action>"
        )
    else:
        parts.append(f"<channel:action>{json.dumps(objects)}</channel:action>")
    return "\n".join(parts)


def _v2_object(action: Mapping[str, Any]) -> dict[str, Any]:
    out = decision_of(action)
    return out


class ScriptedModel:
    """A model service whose every stream is the next scripted text."""

    def __init__(self) -> None:
        self.text = ""

    def get_client(self, role: str) -> Any:
        return object()

    def describe_client(self, client: Any, role: str | None = None) -> Any:
        return SimpleNamespace(provider="scripted", model_name="scripted")

    async def stream_model_text_tracked(
        self, client: Any, messages: Any, *, on_delta: Any, on_complete: Any, **kwargs: Any
    ) -> dict[str, Any]:
        await on_delta(self.text)
        await on_complete({})
        return {"text": self.text}


class _Browser:
    def __init__(self) -> None:
        self.notices: list[str] = []
        self.timeline = SimpleNamespace(last_external_event_seq=0, blocks=[])
        self.runtime_ctx = SimpleNamespace(
            workspace_implementation="custom", bundle_id="bundle.conformance", turn_id="turn-1"
        )
        self.sources_pool: list[Any] = []

    def contribute_notice(self, *, code: str, **kwargs: Any) -> None:
        self.notices.append(code)

    def contribute(self, *args: Any, **kwargs: Any) -> None:
        return None

    def announce(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Streamer:
    def has_started(self, name: str) -> bool:
        return False

    def next_index(self, name: str) -> int:
        return 0

    def started_at(self, name: str) -> None:
        return None


def _solver(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    model: ScriptedModel,
    browser: _Browser,
    module: str = V2,
) -> Any:
    v2 = importlib.import_module(module)
    cls = v2.ReactSolverV2
    s = cls.__new__(cls)
    for name, value in {
        "log": _Log(),
        "ctx_browser": browser,
        "svc": model,
        "comm": SimpleNamespace(delta=_noop, service_event=_noop),
        "scratchpad": SimpleNamespace(
            turn_id="turn-1", register_agentic_response=lambda *a, **k: None
        ),
        "additional_instructions": None,
        "instruction_body": None,
        "instruction_blocks": None,
        "include_tool_catalog": True,
        "include_skill_gallery": False,
        "tool_catalog_detail": "full",
        "_latest_external_event_seq_seen": 0,
        "_last_decision_visible_external_event_seq": 0,
        "_last_consumed_external_event_seq": 0,
        "_steer_interrupt_requested": False,
        "_latest_steer_seq_seen": 0,
        "_last_handled_steer_seq": 0,
        "_latest_followup_seq_seen": 0,
        "_finalize_superseded_followup_seq": 0,
        "_latest_steer_text": "",
        "_active_phase_task": None,
        "_active_phase_name": "",
        "_active_phase_cancelled_by_steer": False,
        "_active_phase_cancel_requested_at": 0.0,
        "_active_generation_iteration": None,
        "_active_generation_raw_chunks": [],
        "_interrupted_generation_snapshot": None,
        "_active_phase_event_watch_task": None,
        "_reactive_iteration_credit_total": 0,
        "_reactive_iteration_credit_cap": 0,
        "_credited_external_event_ids": set(),
        "external_event_source": None,
    }.items():
        with contextlib.suppress(AttributeError):  # a read-only property of the class
            setattr(s, name, value)
    s._update_announce = _noop
    s._drain_external_events = lambda **kwargs: _zero()
    s._mk_mainstream = lambda phase: _noop
    s._mk_exec_code_streamer = lambda phase, idx, execution_id=None: (_noop, None)
    s._mk_content_streamers = lambda phase, sources_list=None, artifact_name=None: ([], [])
    s._mk_timeline_streamer = lambda *args, **kwargs: (_noop, _Streamer())
    s._append_react_timing = lambda **kwargs: None
    sub_cls = rt.subsystem.ToolSubsystem
    sub = sub_cls.__new__(sub_cls)
    sub.log = _Log()
    sub.mcp_subsystem = None
    sub._by_id = {a["id"]: {"id": a["id"], "params": []} for a in adapters}
    s.tools_subsystem = sub
    return s


async def _zero() -> int:
    return 0


def _patch_scaffolding(module: str = V2) -> None:
    retry = importlib.import_module(f"{SDK}.solutions.chatbot.agent_retry")
    v2 = importlib.import_module(module)

    async def once(*, agent_fn: Any, **kwargs: Any) -> Any:
        return await agent_fn(blocks=[{"type": "text", "text": "user"}])

    retry.retry_with_compaction = once
    v2.emit_event = _noop


def drive_turn(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    decisions: Sequence[Mapping[str, Any]],
    *,
    iteration: int = 0,
) -> list[dict[str, Any]]:
    """Per scripted decision, until the node exits or runs a tool: what the node did. The turn
    is at ``iteration`` with no protocol retry spent."""
    logging.disable(logging.CRITICAL)  # the streamer logs every parse error it meets
    try:
        return asyncio.run(_drive(rt, adapters, decisions, iteration))
    finally:
        logging.disable(logging.NOTSET)


def _schema_kind(error: str) -> str | None:
    if not error:
        return None
    if error.startswith("multiple_channel_instances:"):
        return "multiple_channel_instances"
    return "json" if error.startswith("JSON parse error") else "schema"


def _turn_state(adapters: list[dict[str, Any]], outdir: str, iteration: int) -> dict[str, Any]:
    """The solver's state at the start of a decision step of turn ``turn-1``: fresh retries, the
    adapters (a copy: the runtime may change them) and ``outdir`` as its files' place."""
    return {
        "iteration": iteration,
        "max_iterations": 15,
        "adapters": copy.deepcopy(adapters),
        "outdir": outdir,
        "workdir": outdir,
        "turn_id": "turn-1",
        "decision_retries": 0,
        "max_decision_retries": 2,
        "steer_finalize_mode": False,
        "session_log": [],
    }


async def _drive(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    decisions: Sequence[Mapping[str, Any]],
    iteration: int,
) -> list[dict[str, Any]]:
    _patch_scaffolding()
    model, browser = ScriptedModel(), _Browser()
    s = _solver(rt, copy.deepcopy(adapters), model, browser)
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as outdir:
        state = _turn_state(adapters, outdir, iteration)
        for decision in decisions:
            model.text = model_text(decision)
            before = len(browser.notices)
            state = await s._decision_node(state)
            route = s._route_after_decision(state)
            last = state.get("last_decision") or {}
            raw = state.get("last_decision_raw") or {}
            error = str(((raw.get("log") or {}).get("error")) or "")
            notices = [
                code for code in browser.notices[before:] if code.startswith("protocol_violation.")
            ]
            tool_call = last.get("tool_call") if isinstance(last.get("tool_call"), dict) else {}
            out.append(
                {
                    "route": route,
                    "schema": _schema_kind(error),
                    "channel_instances": (
                        int(error.split(":", 1)[1].split("\n", 1)[0])
                        if error.startswith("multiple_channel_instances:")
                        else None
                    ),
                    "notices": [code.removeprefix("protocol_violation.") for code in notices],
                    "retries": int(state.get("decision_retries") or 0),
                    "runs": str(tool_call.get("tool_id") or "")
                    if route == "tool_execution"
                    else None,
                    "exit": (
                        str(last.get("notes") or last.get("action") or "")
                        if route == "exit"
                        else None
                    ),
                }
            )
            if route != "decision":
                break
    return out


V3 = f"{SDK}.solutions.react.v3.runtime"


def drive_v3_decision(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    *,
    mode: str,
    max_actions: int | None = None,
) -> dict[str, Any]:
    """One decision of **v3** (``solutions/react/v3/runtime.py``'s ``_decision_node``) on the
    scripted model text of ``actions`` (one ``<channel:action>`` each), with the runtime's own
    timeline streamer feeding its overseer and early listener (issue 37 §1). The same glue as
    v2's, and an early start's tool answers at once (``react.call.handle_external_tool``)."""
    logging.disable(logging.CRITICAL)
    try:
        return asyncio.run(_drive_v3(rt, adapters, actions, mode, max_actions))
    finally:
        logging.disable(logging.NOTSET)


async def _drive_v3(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    mode: str,
    max_actions: int | None,
) -> dict[str, Any]:
    _patch_scaffolding(V3)

    async def tool(**kwargs: Any) -> dict[str, Any]:
        return {"last_tool_result": [{"ok": True}]}

    rt.react_call.handle_external_tool = tool
    model, browser = ScriptedModel(), _Browser()
    s = _solver(rt, copy.deepcopy(adapters), model, browser, V3)
    del s._mk_timeline_streamer  # the runtime's own: it reports each action to the overseer
    s.multi_action_mode = mode
    s._streamed_final_answer_pending = ""
    if max_actions is not None:
        s.MAX_ACTIONS_PER_ROUND = max_actions
    with tempfile.TemporaryDirectory() as outdir:
        state = _turn_state(adapters, outdir, 0)
        model.text = model_text({"actions": list(actions)})
        state = await s._decision_node(state)
        route = s._route_after_decision(state)
    last = state.get("last_decision") or {}
    tool_call = last.get("tool_call") if isinstance(last.get("tool_call"), dict) else {}
    early = state.get("early_tool_executions") or {}
    return {
        "route": route,
        "notices": [
            code.removeprefix("protocol_violation.")
            for code in browser.notices
            if code.startswith("protocol_violation.")
        ],
        "runs": str(tool_call.get("tool_id") or "") if route == "tool_execution" else None,
        "early_started": len(early),
    }
