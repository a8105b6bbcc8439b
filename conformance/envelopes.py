"""Record what the KDCube runtime publishes on Redis for a few rounds (issue 14):
``KDCUBE_SRC=… python -m conformance.envelopes``.

Each scenario is a round input of the ``rounds`` family shape (policy, round, multi-action mode).
The runtime's own round machinery decides it (``conformance.round_driver``: overseer, early
listener and ledger, backstop); then the runtime's own emitters publish what the decision node
publishes for that outcome, through the runtime's own ``ChatCommunicator`` →
``ChatRelayCommunicator`` → ``ServiceCommunicator``, whose Redis client is replaced by one that
captures ``PUBLISH channel payload`` instead of sending it. The fixture keeps every captured
channel and payload exactly as published.

Glue (the order of calls, as the decision node makes them; the arguments the node passes):

- while streaming, per streamed action: two thinking deltas through ``_mk_mainstream(f"decision
  ({iteration})")``; an early start runs ``ReactRound.execute`` with the slot's ``tc_`` id (the
  tool itself is a stand-in that answers at once: ``react.call.handle_external_tool``);
- after generation: each rejected action through ``emit_react_tool_rejected_event`` with the
  arguments of ``_record_dropped_multi_action_items`` (index, ``<parent>.<index>`` call id,
  ``extra`` plus ``index``); a single-action round rejected after generation with the arguments of
  the decision node's own rejection (no index);
- the decision step through ``infra.emit_event`` with ``etype="solver.react.decision"`` and the
  accepted bundle; then each accepted ``call_tool`` that the ledger does not hold through
  ``ReactRound.execute`` with a fresh ``tc_`` id; the turn ends with ``ChatCommunicator.complete``.

The v2 turns (:data:`V2_SCENARIOS`, fixture :data:`NAME_V2`; ``python -m conformance.envelopes
v2`` records only them) need less glue: v2's own ``_decision_node`` publishes its deltas and its
decision step (``conformance.v2_driver``'s scaffolding otherwise), a decision routed to a tool runs
``ReactRound.execute`` as v2's tool-execution node does, and the turn ends with
``ChatCommunicator.complete`` and the state's final answer.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from conformance import fixtures, harness

NAME = "kdcube-envelopes"
#: The v2 turns (:data:`V2_SCENARIOS`): KDCube's default react agent.
NAME_V2 = "kdcube-envelopes-v2"
TENANT, PROJECT, SESSION = "acme", "demo", "sess-1"

J = "workspace_jobs."
EXEC = "exec_tools.execute_code_python"
EXEC_PARAMS: dict[str, Any] = {
    "prog_name": "count_rows",
    "contract": [{"filepath": "turn-h/files/rows.txt", "description": "the row count"}],
}
#: (id, agent_id the runtime runs as, turn, iteration, mode, actions, tool errors by index)
SCENARIOS: list[dict[str, Any]] = [
    {
        "id": "single-search",
        "agent_id": "main",
        "turn_id": "turn-a",
        "iteration": 0,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": J + "search", "params": {"query": "q"}}],
    },
    {
        "id": "early-then-cap",
        "agent_id": "main",
        "turn_id": "turn-a",
        "iteration": 1,
        "mode": "on",
        "actions": [
            {"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}},
            {"action": "call_tool", "tool_id": J + "search", "params": {"query": "x"}},
            {"action": "call_tool", "tool_id": J + "export_report", "params": {"fmt": "pdf"}},
        ],
    },
    {
        "id": "incompatible",
        "agent_id": "main",
        "turn_id": "turn-a",
        "iteration": 2,
        "mode": "on",
        "actions": [
            {"action": "call_tool", "tool_id": J + "search", "params": {"query": "y"}},
            {"action": "call_tool", "tool_id": J + "export_report", "params": {}},
        ],
        "errors": {0: "upstream_unavailable"},
    },
    {
        "id": "final-answer",
        "agent_id": "main",
        "turn_id": "turn-a",
        "iteration": 3,
        "mode": "off",
        "actions": [{"action": "complete", "final_answer": "done"}],
        "turn_ends": True,
    },
    {
        "id": "unknown-agent-unknown-tool",
        "agent_id": "helper.bot",
        "turn_id": "turn-b",
        "iteration": 0,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": "nope.tool", "params": {}}],
    },
    {
        "id": "early-only",
        "agent_id": "helper.bot",
        "turn_id": "turn-b",
        "iteration": 1,
        "mode": "on",
        "actions": [
            {"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}},
            {"action": "complete", "final_answer": "started"},
        ],
        "turn_ends": True,
    },
    {
        # A final answer after a non-neutral tool: the runtime drops it with index 1, an empty
        # tool id and ``extra.action`` = "complete".
        "id": "final-answer-rejected",
        "agent_id": "main",
        "turn_id": "turn-c",
        "iteration": 0,
        "mode": "on",
        "actions": [
            {"action": "call_tool", "tool_id": J + "search", "params": {"query": "z"}},
            {"action": "complete", "final_answer": "done"},
        ],
    },
    {
        # A single-action round whose call fails the decision node's protocol check: the
        # rejection carries no index; the node then publishes its decision step.
        "id": "protocol-rejected-single",
        "agent_id": "main",
        "turn_id": "turn-c",
        "iteration": 1,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": J + "no_such_tool", "params": {}}],
    },
    {
        # A provider re-stream: the first stream started launch_background_job early at slot 0;
        # the second puts search on slot 0 and launch_background_job on slot 1.
        "id": "restream-moves-early-slot",
        "agent_id": "main",
        "turn_id": "turn-c",
        "iteration": 2,
        "mode": "on",
        "attempts": [
            [{"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}}],
            [
                {"action": "call_tool", "tool_id": J + "search", "params": {"query": "r"}},
                {"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}},
            ],
        ],
        "turn_ends": True,
    },
    {
        # A re-stream that ends in a final answer (issue 35): the first stream started
        # launch_background_job early at slot 0 and broke; the second decided complete at 0.
        "id": "restream-final-answer",
        "agent_id": "main",
        "turn_id": "turn-d",
        "iteration": 0,
        "mode": "on",
        "attempts": [
            [{"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}}],
            [{"action": "complete", "final_answer": "done"}],
        ],
        "turn_ends": True,
    },
    {
        # The decision node raises a provider error, which the runtime's retry_with_compaction
        # does not retry (not a context-limit error): the turn fails with chat.error (issue 35).
        "id": "decision-provider-error",
        "agent_id": "main",
        "turn_id": "turn-e",
        "iteration": 0,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": J + "search", "params": {"query": "p"}}],
        "fails": "provider",
    },
    {
        # A context-limit error: retry_with_compaction's retry itself crashes (force_sanitize is
        # passed twice) and the turn fails with chat.error (issue 35).
        "id": "decision-context-limit-retry-crashes",
        "agent_id": "main",
        "turn_id": "turn-f",
        "iteration": 1,
        "mode": "on",
        "actions": [
            {"action": "call_tool", "tool_id": J + "launch_background_job", "params": {}},
            {"action": "call_tool", "tool_id": J + "search", "params": {"query": "c"}},
        ],
        "fails": "context_limit",
    },
    {
        # An isolated tool that runs past its limit (issue 35): the runtime's own
        # execute_tool_in_isolation runs it in a real child process, its subprocess runner kills
        # the child at ISOLATION_LIMIT_S, and the result file the child reserved is missing.
        "id": "isolated-tool-killed-at-limit",
        "agent_id": "main",
        "turn_id": "turn-g",
        "iteration": 0,
        "mode": "off",
        "actions": [
            {"action": "call_tool", "tool_id": J + "export_report", "params": {"fmt": "pdf"}}
        ],
        "isolated": True,
        "turn_ends": True,
    },
    # The code-execution call with its code on ``<channel:code>`` (issue 37 §5): the decision
    # node's own exec streamer (``_mk_exec_code_streamer``) is fed the call's JSON and the code as
    # ``_hub_on_code`` feeds it; whether the runtime counts the code channel complete
    # (``_exec_streamer_is_complete``: code captured and a contract) is recorded with the case.
    {
        "id": "exec-code-complete",
        "policy": "files",
        "agent_id": "main",
        "turn_id": "turn-h",
        "iteration": 0,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": EXEC, "params": EXEC_PARAMS}],
        "code": "rows = [1, 2]\nprint(len(rows))\n",
    },
    {
        "id": "exec-code-without-contract",
        "policy": "files",
        "agent_id": "main",
        "turn_id": "turn-h",
        "iteration": 1,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": EXEC, "params": {"prog_name": "count"}}],
        "code": "print(3)\n",
    },
    {
        "id": "exec-code-blank",
        "policy": "files",
        "agent_id": "main",
        "turn_id": "turn-h",
        "iteration": 2,
        "mode": "off",
        "actions": [{"action": "call_tool", "tool_id": EXEC, "params": EXEC_PARAMS}],
        "code": "  \n",
        "turn_ends": True,
    },
]
#: The isolation limit of the recorded isolated call, in seconds (the runtime's is 240, which
#: ``execute_tool_in_isolation`` passes as ``timeout_s``; the recorder passes this one instead).
#: Long enough for the child to start and reserve its result file on a busy machine.
ISOLATION_LIMIT_S = 12


def attempts_of(scenario: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The streams of the scenario's round: one, unless it re-streams."""
    return scenario.get("attempts") or [scenario["actions"]]


class CapturingRedis:
    """Stands in for the runtime's Redis client: keeps what ``PUBLISH`` would send."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    async def publish(self, channel: str, payload: str) -> int:
        self.published.append({"channel": channel, "payload": json.loads(payload)})
        return 0


def _communicator(rt: harness.Runtime, capture: CapturingRedis, agent_id: str, turn_id: str) -> Any:
    emitters = importlib.import_module("kdcube_ai_app.apps.chat.emitters")
    service_comm = importlib.import_module("kdcube_ai_app.infra.orchestration.app.communicator")
    bus = service_comm.ServiceCommunicator(redis_url="redis://captured")
    bus._aioredis = capture
    relay = emitters.ChatRelayCommunicator(redis_url="redis://captured", comm=bus)
    return emitters.ChatCommunicator(
        emitter=relay,
        tenant=TENANT,
        project=PROJECT,
        user_id="user-1",
        user_type="registered",
        service={
            "request_id": f"req-{turn_id}",
            "tenant": TENANT,
            "project": PROJECT,
            "user": "user-1",
            "agent_id": agent_id,
        },
        conversation={"session_id": SESSION, "conversation_id": "conv-1", "turn_id": turn_id},
    )


async def _play(
    rt: harness.Runtime,
    scenario: dict[str, Any],
    attempts: list[list[dict[str, Any]]],
    adapters: list[dict[str, Any]],
) -> Any:
    from conformance import round_driver

    capture = CapturingRedis()
    comm = _communicator(rt, capture, scenario["agent_id"], scenario["turn_id"])
    infra = importlib.import_module(f"{harness.SDK}.solutions.infra")
    round_mod = importlib.import_module(f"{harness.SDK}.solutions.react.round")
    solver = rt.solver.ReactSolverV2.__new__(rt.solver.ReactSolverV2)
    solver.comm = comm
    iteration, turn_id = scenario["iteration"], scenario["turn_id"]
    # ReactRound.execute reads the round's iteration through the context browser's runtime_ctx.
    solver.ctx_browser = SimpleNamespace(runtime_ctx=SimpleNamespace(turn_id=turn_id))
    errors: dict[int, str] = scenario.get("errors", {})
    current: dict[str, int] = {"index": -1}

    async def tool(**kwargs: Any) -> dict[str, Any]:
        if scenario.get("isolated"):
            return await _run_isolated(kwargs["state"]["last_decision"])
        code = errors.get(current["index"])
        if code:
            return {"last_tool_result": [{"error": {"code": code, "message": code}}]}
        return {"last_tool_result": [{"ok": True}]}

    rt.react_call.handle_external_tool = tool

    async def execute(decision: dict[str, Any], index: int, call_id: str) -> None:
        current["index"] = index
        state = {
            "last_decision": copy.deepcopy(decision),
            "pending_tool_call_id": call_id,
            "pending_tool_origin_iteration": iteration,
        }
        await round_mod.ReactRound.execute(react=solver, state=state)

    delta = solver._mk_mainstream(f"decision ({iteration})")
    parent = f"tc_parent{iteration:03d}"
    # Every stream of the round (a re-stream publishes nothing of its own), then what the node
    # does after the last one.
    for stream_rows, stream in zip(attempts, attempts_of(scenario), strict=True):
        for row, action in zip(stream_rows, stream, strict=True):
            if row["online"] == "not_observed":
                continue
            await delta(text=f"action {row['index']}: ", marker="thinking")
            await delta(text=json.dumps(action.get("tool_id")), marker="thinking")
            if "code" in scenario:
                await feed_exec_code(solver, iteration, action, scenario["code"])
            early = row.get("early")
            if early and early["started"]:
                decision = round_driver.decision_of(action)
                await execute(decision, row["index"], early["tool_call_id"])
    if scenario.get("fails"):
        await _fail_decision(rt, comm, scenario["fails"])
        return capture.published
    rows, actions = attempts[-1], attempts_of(scenario)[-1]
    single = scenario["mode"] == "off" or len(actions) == 1
    accepted: list[tuple[int, dict[str, Any]]] = []
    for row, action in zip(rows, actions, strict=True):
        if row.get("final") == "rejected":
            code = row.get("online_code") or row.get("final_code") or "rejected"
            extra = dict(row.get("online_extra") or {})
            if single:
                await rt.solver.emit_react_tool_rejected_event(
                    react=solver,
                    tool_id=str(action.get("tool_id") or ""),
                    tool_call_id=parent,
                    params=action.get("params"),
                    iteration=iteration,
                    code=code,
                    message=code,
                    extra=row.get("final_extra") or {**extra, "tool_id": action.get("tool_id")},
                )
            else:
                await rt.solver.emit_react_tool_rejected_event(
                    react=solver,
                    tool_id=str(action.get("tool_id") or ""),
                    tool_call_id=f"{parent}.{row['index']}",
                    parent_tool_call_id=parent,
                    params=action.get("params"),
                    iteration=iteration,
                    index=row["index"],
                    code=code,
                    message=f"Action #{row['index'] + 1} was not run. {code}",
                    extra={**extra, "index": row["index"]},
                )
        elif row.get("final") == "accepted":
            accepted.append((row["index"], round_driver.decision_of(action)))
    bundle = [decision for _, decision in accepted]
    data: dict[str, Any] = dict(bundle[0]) if bundle else {"error": "no_decision"}
    if rows[0].get("final_code") == "tool_call_invalid":
        # The node publishes the decision it retries (decision["notes"] set by the node).
        data = {
            **round_driver.decision_of(actions[0]),
            "notes": "tool_call_invalid; retry decision",
        }
    if len(actions) > 1 and scenario["mode"] != "off":
        data["bundle"] = bundle
        data["bundle_size"] = len(bundle)
    await infra.emit_event(
        comm=comm,
        etype="solver.react.decision",
        title=f"ReAct Round ({iteration}). Decision Node",
        step=f"react({iteration}).decision",
        data=data,
        agent=f"solver.react({iteration}).decision",
    )
    for (index, decision), row in zip(
        accepted, [r for r in rows if r.get("final") == "accepted"], strict=True
    ):
        if decision.get("action") != "call_tool":
            continue
        executed = row.get("executed") or {}
        if executed.get("path") == "ordinary":
            await execute(decision, index, f"tc_post{iteration:03d}{index:03d}")
    if scenario.get("turn_ends"):
        await comm.complete(data={"final_answer": "done"})
    return capture.published


async def feed_exec_code(solver: Any, iteration: int, action: dict[str, Any], code: str) -> Any:
    """The decision node's exec streamer for the round's code-execution call, made as the node
    makes it (``_mk_exec_code_streamer("decision (N)", …)`` over the node's communicator) and fed
    as ``_hub_on_code`` feeds it when ``<channel:code>`` streams: the call's JSON first
    (``_attach_exec_json_if_ready``), then the code, then the channel's end. Returns the
    streamer, whose ``_exec_streamer_is_complete`` is the backstop's
    ``allow_single_exec_with_code``."""
    from conformance import round_driver

    _fn, widget = solver._mk_exec_code_streamer(
        f"decision ({iteration})", 0, execution_id=f"exec_{iteration:03d}"
    )
    raw = json.dumps(round_driver.decision_of(action))
    await widget.feed_json(text=raw, completed=True, channel_instance=0)
    await widget.feed_code(text=code, completed=False, channel_instance=0)
    await widget.feed_code(text="", completed=True, channel_instance=0)
    return widget


def exec_code_complete(rt: harness.Runtime, scenario: dict[str, Any]) -> bool:
    """What the runtime's ``_exec_streamer_is_complete`` answers for the scenario's code (fed
    once to a streamer whose deltas go nowhere)."""
    solver = rt.solver.ReactSolverV2.__new__(rt.solver.ReactSolverV2)
    solver.comm = _communicator(rt, CapturingRedis(), scenario["agent_id"], scenario["turn_id"])
    solver.ctx_browser = SimpleNamespace(runtime_ctx=SimpleNamespace(turn_id=scenario["turn_id"]))
    action = scenario["actions"][0]
    widget = asyncio.run(feed_exec_code(solver, scenario["iteration"], action, scenario["code"]))
    return bool(rt.solver.ReactSolverV2._exec_streamer_is_complete(widget))


#: Rounds of KDCube's default **v2** react agent (issue 37 §0): each a turn of scripted model
#: answers (``v2_driver.model_text``) run through v2's own ``_decision_node`` until it exits or
#: the answers run out; a decision routed to tool execution runs ``ReactRound.execute``.
V2_SCENARIOS: list[dict[str, Any]] = [
    {
        # Two action channels: multiple_channel_instances:2, nothing runs, the model is asked
        # again (the next iteration), which then calls one tool.
        "id": "v2-two-channels-reask",
        "turn_id": "v2-turn-a",
        "decisions": [
            {
                "actions": [
                    {"action": "call_tool", "tool_id": J + "search", "params": {"query": "a"}},
                    {"action": "call_tool", "tool_id": J + "export_report", "params": {}},
                ]
            },
            {"actions": [{"action": "call_tool", "tool_id": J + "search", "params": {"q": "a"}}]},
            {"actions": [{"action": "complete", "final_answer": "done"}]},
        ],
    },
    {
        # A tool_call whose params are a list: the action model fails, action_schema_error.
        "id": "v2-bad-tool-call",
        "turn_id": "v2-turn-b",
        "decisions": [
            {"actions": [{"action": "call_tool", "tool_id": J + "search", "params": [1]}]},
            {"actions": [{"action": "complete", "final_answer": "done"}]},
        ],
    },
    {
        # A final answer inside a call_tool: _validate_decision's final_answer_with_tool_call.
        "id": "v2-final-answer-with-tool-call",
        "turn_id": "v2-turn-c",
        "decisions": [
            {
                "actions": [
                    {
                        "action": "call_tool",
                        "tool_id": J + "search",
                        "params": {"q": "c"},
                        "final_answer": "done",
                    }
                ]
            },
            {"actions": [{"action": "complete", "final_answer": "done"}]},
        ],
    },
    {
        # Two channels three times: two protocol retries, then the turn exits.
        "id": "v2-retries-exhausted",
        "turn_id": "v2-turn-d",
        "decisions": [
            {
                "actions": [
                    {"action": "call_tool", "tool_id": J + "search", "params": {"q": str(n)}},
                    {"action": "call_tool", "tool_id": J + "export_report", "params": {}},
                ]
            }
            for n in range(3)
        ],
    },
    {
        # An unknown tool: tool_call_invalid and tool_signature_red (both retries in one
        # decision); the next answer calls a known tool.
        "id": "v2-unknown-tool",
        "turn_id": "v2-turn-e",
        "decisions": [
            {"actions": [{"action": "call_tool", "tool_id": "nope.tool", "params": {}}]},
            {"actions": [{"action": "call_tool", "tool_id": J + "search", "params": {"q": "e"}}]},
            {"actions": [{"action": "complete", "final_answer": "done"}]},
        ],
    },
    {
        # A plain accepted call, then the final answer.
        "id": "v2-plain-call",
        "turn_id": "v2-turn-f",
        "decisions": [
            {"actions": [{"action": "call_tool", "tool_id": J + "search", "params": {"q": "f"}}]},
            {"actions": [{"action": "complete", "final_answer": "done"}]},
        ],
    },
]


async def _play_v2(
    rt: harness.Runtime, scenario: dict[str, Any], adapters: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One v2 turn published through the runtime's own emitters: v2's ``_decision_node`` (its
    ``_mk_mainstream`` deltas, its ``emit_event`` decision step), ``ReactRound.execute`` for a
    decision routed to tool execution (the tool answers at once), ``ChatCommunicator.complete``
    with the state's final answer when the node exits (the workflow's exit node publishes nothing
    of its own). The same scaffolding as ``v2_driver`` otherwise. What each decision did, and
    every captured envelope."""
    from conformance import v2_driver

    capture = CapturingRedis()
    turn_id = scenario["turn_id"]
    comm = _communicator(rt, capture, "main", turn_id)
    infra = importlib.import_module(f"{harness.SDK}.solutions.infra")
    round_mod = importlib.import_module(f"{harness.SDK}.solutions.react.round")
    v2 = importlib.import_module(v2_driver.V2)
    v2_driver._patch_scaffolding()
    v2.emit_event = infra.emit_event  # the node's own decision step, published

    async def tool(**kwargs: Any) -> dict[str, Any]:
        # The runtime's handler returns the whole state (the node's next state).
        state = kwargs["state"]
        state["last_tool_result"] = [{"ok": True}]
        return state

    rt.react_call.handle_external_tool = tool
    model, browser = v2_driver.ScriptedModel(), v2_driver._Browser()
    browser.runtime_ctx.turn_id = turn_id
    s = v2_driver._solver(rt, copy.deepcopy(adapters), model, browser)
    s.comm = comm
    s.scratchpad.turn_id = turn_id
    del s._mk_mainstream  # the class's own: the decision agent's deltas
    routes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as outdir:
        state: dict[str, Any] = {
            "iteration": 0,
            "max_iterations": 15,
            "adapters": copy.deepcopy(adapters),
            "outdir": outdir,
            "workdir": outdir,
            "turn_id": turn_id,
            "decision_retries": 0,
            "max_decision_retries": 2,
            "steer_finalize_mode": False,
            "session_log": [],
        }
        for decision in scenario["decisions"]:
            model.text = v2_driver.model_text(decision)
            iteration = int(state.get("iteration") or 0)
            state = await s._decision_node(state)
            route = s._route_after_decision(state)
            routes.append(
                {
                    "iteration": iteration,
                    "route": route,
                    "retries": int(state.get("decision_retries") or 0),
                    "notes": str((state.get("last_decision") or {}).get("notes") or ""),
                }
            )
            if route == "tool_execution":
                state = await round_mod.ReactRound.execute(react=s, state=state)
            if route == "exit":
                break
        await comm.complete(data={"final_answer": str(state.get("final_answer") or "")})
    return routes, capture.published


def record_v2(rt: harness.Runtime) -> list[dict[str, Any]]:
    from conformance import runtime_policy

    adapters = runtime_policy.recorded_adapters(rt, "sample")
    logging.disable(logging.CRITICAL)  # the streamer logs every parse error it meets
    try:
        cases = []
        for scenario in V2_SCENARIOS:
            routes, published = asyncio.run(_play_v2(rt, scenario, adapters))
            cases.append(
                {
                    "id": scenario["id"],
                    "input": {
                        "policy": "sample",
                        "agent_id": "main",
                        "react_version": "v2",
                        "decisions": scenario["decisions"],
                    },
                    "runtime_v2": routes,
                    "published": published,
                }
            )
        return cases
    finally:
        logging.disable(logging.NOTSET)


#: What the decision node passes ``retry_with_compaction`` as ``render_params``
#: (``ReactSolverV2``'s decision call, ``v3/runtime.py``; no compaction was asked for).
DECISION_RENDER_PARAMS: dict[str, Any] = {
    "cache_last": True,
    "include_sources": True,
    "include_announce": True,
    "force_sanitize": False,
}
#: The provider errors of the failing scenarios (``ServiceError`` fields as the model service
#: fills them): a rate limit (not retried) and a context-limit error (retried with compaction).
PROVIDER_ERRORS: dict[str, dict[str, Any]] = {
    "provider": {
        "error_type": "RateLimitError",
        "message": "Provider rate limit reached (429): retry after 20 s",
        "http_status": 429,
        "retryable": True,
    },
    "context_limit": {
        "error_type": "BadRequestError",
        "message": "prompt too long: 212000 tokens > 200000 maximum",
        "http_status": 400,
        "code": "context_length_exceeded",
    },
}


async def _fail_decision(rt: harness.Runtime, comm: Any, kind: str) -> None:
    """The decision node's model call fails: the runtime's own ``retry_with_compaction`` runs it
    (the decision agent raising the provider's ``ServiceException``), and what it raises goes
    to the entrypoint's ``report_turn_error``, which publishes ``chat.error``."""
    errors = importlib.import_module("kdcube_ai_app.infra.service_hub.errors")
    retry = importlib.import_module(f"{harness.SDK}.solutions.chatbot.agent_retry")
    entrypoint = importlib.import_module(f"{harness.SDK}.solutions.chatbot.entrypoint")

    class Timeline:
        async def render(self, **params: Any) -> list[dict[str, Any]]:
            return [{"type": "text", "text": "timeline"}]

    async def decision_agent(**kwargs: Any) -> Any:
        err = errors.ServiceError(
            kind="llm",
            service_name="ModelServiceBase",
            provider="anthropic",
            model_name="claude-sonnet-4",
            **PROVIDER_ERRORS[kind],
        )
        raise errors.ServiceException(err)

    node = object.__new__(entrypoint.BaseEntrypoint)
    node.logger = SimpleNamespace(log=lambda *args, **kwargs: None)
    node._comm = comm
    node.comm_context = None
    try:
        await retry.retry_with_compaction(
            ctx_browser=SimpleNamespace(timeline=Timeline()),
            system_text_fn=lambda: "system",
            render_params=dict(DECISION_RENDER_PARAMS),
            agent_fn=decision_agent,
        )
    except Exception as exc:
        await entrypoint.BaseEntrypoint.report_turn_error(node, state={}, exc=exc)


#: The slow tool the isolated child runs (the module the ``workspace_jobs`` alias names).
SLOW_TOOLS = """import asyncio


class _Tools:
    async def export_report(self, **params):
        await asyncio.sleep(600)
        return {"ok": True}


tools = _Tools()
"""
#: The repository (``conformance`` importable from the child).
ROOT = Path(__file__).resolve().parent.parent
#: Loaded first by the child's Python: the same stand-ins for the runtime's unused imports, with
#: the real semantic-kernel (``io_tools.tool_call`` is a ``kernel_function``).
CHILD_SITE = (
    "import os\nfrom conformance import stubs\n"
    "stubs.install(os.environ['KDCUBE_SRC'], real_semantic_kernel=True)\n"
)


async def _run_isolated(decision: dict[str, Any]) -> dict[str, Any]:
    """Run the decision's call as the runtime runs an isolated tool: its own
    ``execute_tool_in_isolation`` (the child's ``main.py``, bootstrap and ``io_tools.tool_call``,
    which reserves the result file before the tool runs), through ``_InProcessRuntime`` and
    ``_run_subprocess``, with :data:`ISOLATION_LIMIT_S` as the limit. The tool handler's result
    row (``last_tool_result``) carries the error it returns, as the external tool handler's does."""
    execution = importlib.import_module(f"{harness.SDK}.runtime.execution")
    iso = importlib.import_module(f"{harness.SDK}.runtime.iso_runtime")
    proto = importlib.import_module(f"{harness.SDK}.solutions.react.proto")
    portable = importlib.import_module(f"{harness.SDK}.runtime.portable_spec")
    base = Path(tempfile.mkdtemp(prefix="kdcube-iso-"))
    try:
        (base / "mods").mkdir()
        (base / "mods" / "slow_jobs.py").write_text(SLOW_TOOLS, encoding="utf-8")
        (base / "site").mkdir()
        (base / "site" / "sitecustomize.py").write_text(CHILD_SITE, encoding="utf-8")
        sys.path.insert(0, str(base / "mods"))
        slow_jobs = importlib.import_module("slow_jobs")
        alias = decision["tool_call"]["tool_id"].split(".", 1)[0]
        manager = SimpleNamespace(
            tool_modules_tuple_list=lambda: [("slow_jobs", slow_jobs)],
            export_runtime_globals=lambda: {
                "TOOL_ALIAS_MAP": {alias: "slow_jobs"},
                "TOOL_MODULE_FILES": {alias: str(base / "mods" / "slow_jobs.py")},
            },
            build_portable_spec=lambda: portable.PortableSpec(
                model_config=portable.ModelConfigSpec()
            ),
            comm=None,
            bundle_root=str(base),
        )
        run = iso._InProcessRuntime.run_tool_in_isolation

        async def with_limit(self: Any, **kwargs: Any) -> Any:
            return await run(self, **{**kwargs, "timeout_s": ISOLATION_LIMIT_S})

        old_path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(base / "site"), str(ROOT), old_path])
        iso._InProcessRuntime.run_tool_in_isolation = with_limit
        try:
            response = await execution.execute_tool_in_isolation(
                runtime_ctx=proto.RuntimeCtx(conversation_id="conv-1", turn_id="turn-g"),
                tool_execution_context={
                    "tool_id": decision["tool_call"]["tool_id"],
                    "params": decision["tool_call"].get("params") or {},
                },
                workdir=base / "work",
                outdir=base / "out",
                tool_manager=manager,
                logger=SimpleNamespace(log=lambda *args, **kwargs: None),
            )
        finally:
            iso._InProcessRuntime.run_tool_in_isolation = run
            os.environ["PYTHONPATH"] = old_path
            sys.path.remove(str(base / "mods"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    error = response.get("error") or {}
    return {
        "last_tool_result": [
            {"error": {"code": error.get("code"), "message": error.get("message")}}
        ]
    }


def record(rt: harness.Runtime) -> list[dict[str, Any]]:
    from conformance import round_driver, round_policies, runtime_policy
    from conformance.families.files import POLICIES as FILE_POLICIES
    from conformance.families.rounds import answer_from_rows

    known = {**round_policies.policies(), **FILE_POLICIES}
    adapters_of = {
        name: runtime_policy.agent_adapters(
            rt, known[name]["policy"], "main", manifest=known[name]["manifest"]
        )
        for name in {scenario.get("policy", "sample") for scenario in SCENARIOS}
    }
    cases = []
    for scenario in SCENARIOS:
        policy = scenario.get("policy", "sample")
        adapters = adapters_of[policy]
        spec = {
            "turn_id": scenario["turn_id"],
            "iteration": scenario["iteration"],
            "attempts": attempts_of(scenario),
        }
        if "code" in scenario:
            # The round's code channel as the runtime judged it (issue 37 §5).
            spec["exec_code_complete"] = exec_code_complete(rt, scenario)
        attempts = round_driver.drive_round(rt, adapters, spec, scenario["mode"])
        published = asyncio.run(_play(rt, scenario, attempts, adapters))
        cases.append(
            {
                "id": scenario["id"],
                "input": {
                    "policy": policy,
                    "agent_id": scenario["agent_id"],
                    "round": spec,
                    "multi_action_mode": scenario["mode"],
                    "tool_errors": {str(k): v for k, v in scenario.get("errors", {}).items()},
                    # The decision's model call fails: no decision step, the turn ends in
                    # chat.error (the runtime's own verdicts are those of the stream).
                    **({"fails": scenario["fails"]} if scenario.get("fails") else {}),
                    # The limit the runtime's subprocess runner had for an isolated call.
                    **(
                        {"isolation_limit_s": ISOLATION_LIMIT_S} if scenario.get("isolated") else {}
                    ),
                },
                # The last stream's actions (the one post-generation ran), and every stream's.
                "runtime": answer_from_rows(attempts[-1]),
                "runtime_attempts": [answer_from_rows(rows) for rows in attempts],
                "published": published,
            }
        )
    return cases


def main(argv: list[str] | None = None) -> int:
    """Record both fixtures, or only the one named (``v3``: :data:`NAME`; ``v2``:
    :data:`NAME_V2`)."""
    which = (argv if argv is not None else sys.argv[1:]) or ["v3", "v2"]
    try:
        rt = harness.load()
    except harness.HarnessError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    for name, recorder in ((NAME, record), (NAME_V2, record_v2)):
        if (name == NAME and "v3" not in which) or (name == NAME_V2 and "v2" not in which):
            continue
        cases = recorder(rt)
        path = fixtures.write(name, rt.commit, cases)
        count = sum(len(c["published"]) for c in cases)
        print(f"recorded {len(cases)} turns/rounds, {count} published envelopes -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
