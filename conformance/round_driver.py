"""Drive one round (all its attempts) through the runtime's own round machinery and report what
happened to every streamed action.

Glue (listed in the README): the runtime's decision node (``ReactSolverV2`` ``decision`` step) needs
a model stream, a timeline and a chat communicator; the driver replaces that node's scaffolding and
calls the runtime's pieces in the order the node does:

1. per attempt (a re-stream of the same round into the same decision call: the overseer and the
   ledger live for the whole call), per streamed action in order: the action's identity is reported
   to ``RoundActionOverseer.observe_action_signal`` without params, as the runtime's timeline
   streamer does (never for an empty action or a ``call_tool`` without ``tool_id``); a
   ``StreamPolicyViolation`` ends the stream; otherwise the action completes and the runtime's
   ``EarlyToolExecutionListener.on_action_completed`` runs with the runtime's own validators
   (``_validate_decision``, ``_validate_tool_call_protocol``, ``_tool_executes_early``); the early
   "execution" succeeds at once (``consumed``), no signature check (no tool signatures exist here);
2. after the last attempt: the runtime's ``_stream_policy_recovery_packet`` rebuilds the bundle
   when the overseer rejected something, else the bundle is every streamed action;
3. multi-action on and more than one action: the runtime's ``_prepare_safe_multi_action_bundle``
   with the prevalidated indices the node computes; otherwise the first action alone, checked by
   ``_validate_decision``;
4. every accepted ``call_tool`` is looked up in the ledger by ``consumed_early_tool_record`` at its
   bundle position, as the post-generation executor does.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from conformance.harness import Runtime, decision_of

#: Tools the decision node refuses as a single action (``exec_only_ids`` in ``v3/runtime.py``).
EXEC_ONLY_TOOLS = frozenset({"ctx_tools.fetch_ctx"})


class _Log:
    def log(self, *args: Any, **kwargs: Any) -> None:
        return None


async def _noop(**kwargs: Any) -> None:
    return None


def solver(rt: Runtime, *, max_actions: int | None, mode: str) -> Any:
    cls = rt.solver.ReactSolverV2
    s = cls.__new__(cls)
    s.log = _Log()
    s.tools_subsystem = None
    s._streamed_final_answer_pending = ""
    s.multi_action_mode = mode
    if max_actions is not None:
        s.MAX_ACTIONS_PER_ROUND = max_actions
    return s


def drive_round(
    rt: Runtime,
    adapters: list[dict[str, Any]],
    spec: Mapping[str, Any],
    mode: str,
) -> list[list[dict[str, Any]]]:
    return asyncio.run(_drive(rt, adapters, spec, mode))


async def _drive(
    rt: Runtime, adapters: list[dict[str, Any]], spec: Mapping[str, Any], mode: str
) -> list[list[dict[str, Any]]]:
    s = solver(rt, max_actions=spec.get("max_actions"), mode=mode)
    by_id = s._adapters_index(adapters)
    turn_id, iteration = spec["turn_id"], spec["iteration"]
    state: dict[str, Any] = {"turn_id": turn_id}
    overseer = rt.overseer.RoundActionOverseer(
        resolve_traits=lambda tool_id, tool_params=None: s._tool_traits_for_id(
            tool_id,
            adapters_by_id=by_id,
            tool_params=dict(tool_params or {}) if isinstance(tool_params, dict) else None,
        ),
        max_actions=s.MAX_ACTIONS_PER_ROUND,
    )
    violation_cls = rt.stream_policy.StreamPolicyViolation
    tasks: dict[str, Any] = {}

    def accepted_by_overseer(action_index: int, action: str, tool_id: str) -> bool:
        return any(
            o.index == int(action_index)
            and o.action == str(action or "").strip()
            and o.tool_id == str(tool_id or "").strip()
            for o in overseer.accepted_actions()
        )

    def early_safe(decision: dict[str, Any]) -> bool:
        call = decision.get("tool_call") if isinstance(decision.get("tool_call"), dict) else {}
        params = call.get("params") if isinstance(call.get("params"), dict) else {}
        return bool(
            s._tool_executes_early(
                str(call.get("tool_id") or "").strip(), adapters_by_id=by_id, tool_params=params
            )
        )

    async def validate_protocol(tool_call: Any) -> dict[str, Any]:
        return dict(s._validate_tool_call_protocol(tool_call=tool_call, adapters_by_id=by_id))

    async def execute(decision: dict[str, Any], tool_call_id: str) -> dict[str, Any]:
        return {"status": "ok"}

    attempts_out: list[list[dict[str, Any]]] = []
    last_decisions: dict[int, dict[str, Any]] = {}
    for attempt in spec["attempts"]:
        rows: list[dict[str, Any]] = []
        instances: dict[int, dict[str, Any]] = {}
        stopped = False
        for index, action in enumerate(attempt):
            row: dict[str, Any] = {"index": index, "online": "not_observed", "early": None}
            rows.append(row)
            if stopped:
                continue
            decision = decision_of(action)
            action_text = str(decision.get("action") or "").strip()
            call = decision.get("tool_call") if isinstance(decision.get("tool_call"), dict) else {}
            tool_id = str(call.get("tool_id") or "").strip()
            if action_text and not (action_text == "call_tool" and not tool_id):
                gate = overseer.gate_for(action_index=index, emit_delta=_noop)
                answer = overseer.gate_for(
                    action_index=index, emit_delta=_noop, lane="final_answer"
                )
                try:
                    await overseer.observe_action_signal(
                        action_index=index,
                        action=action_text,
                        tool_id=tool_id,
                        action_gate=gate,
                        answer_gate=answer,
                    )
                    row["online"] = "accepted"
                except violation_cls as exc:
                    row["online"] = "rejected"
                    row["online_code"] = exc.code
                    row["online_extra"] = dict(exc.extra or {})
                    stopped = True
                    continue
            instances[index] = {"parsed_decision": copy.deepcopy(decision), "raw_chunks": []}
            listener = rt.early.EarlyToolExecutionListener(
                state=state,
                turn_id=turn_id,
                iteration=iteration,
                action_index=index,
                validate_decision=s._validate_decision,
                validate_protocol=validate_protocol,
                action_accepted=accepted_by_overseer,
                execution_policy_allows=early_safe,
                execute_tool=execute,
                execution_tasks=tasks,
            )
            early_decision = copy.deepcopy(decision)
            s._suppress_tool_call_final_answer(early_decision)
            before = set(state.get(rt.early.EARLY_TOOL_EXECUTION_LEDGER_KEY, {}))
            record = await listener.on_action_completed(decision=early_decision)
            if record is not None:
                started = record.get("action_key") not in before
                row["early"] = {
                    "started": started,
                    "tool_call_id": record.get("tool_call_id"),
                    "action_index": record.get("action_index"),
                }
        await rt.early.drain_early_tool_executions(tasks)
        attempts_out.append(rows)
        last_decisions = {i: inst["parsed_decision"] for i, inst in instances.items()}
    # Only the last stream reaches post-generation; an earlier, replaced stream ran nothing but
    # its early starts.
    for rows in attempts_out[:-1]:
        for row in rows:
            row["final"] = {"accepted": "dropped"}.get(row["online"], row["online"])
    await _post_generation(rt, s, by_id, spec, state, overseer, last_decisions, attempts_out[-1])
    return attempts_out


async def _post_generation(
    rt: Runtime,
    s: Any,
    by_id: dict[str, Any],
    spec: Mapping[str, Any],
    state: dict[str, Any],
    overseer: Any,
    decisions: dict[int, dict[str, Any]],
    rows: list[dict[str, Any]],
) -> None:
    turn_id, iteration = spec["turn_id"], spec["iteration"]
    rejected = overseer.rejected_actions()
    # The stream's own parse: every completed action, in stream order.
    positions = sorted(decisions)
    packet: dict[str, Any] = {
        "agent_response": decisions[positions[0]] if positions else {},
        "agent_response_bundle": [decisions[i] for i in positions],
        "log": {},
    }
    sources = list(positions)
    streamed = spec["attempts"][-1]
    if not rejected and not s._multi_action_enabled() and len(streamed) > 1:
        # The decision node parses the model's text with the channel streamer first: its answer
        # for the last stream's action channels (the runtime's own parse, scripted text).
        error = await _channel_parse_error(rt, streamed, s.multi_action_mode)
        if error.startswith("multiple_channel_instances:"):
            for row in rows:
                if row["online"] == "accepted":
                    row.update(final="rejected", final_code="action_schema_error")
                else:
                    row["final"] = "rejected" if row["online"] == "rejected" else "not_observed"
            return
    if rejected:
        instances = {i: {"parsed_decision": d, "raw_chunks": []} for i, d in decisions.items()}
        recovered = s._stream_policy_recovery_packet(
            decision_packet=packet,
            decision_stream_instances=instances,
            accepted_actions=overseer.accepted_actions(),
            rejected_items=rejected,
        )
        if recovered is None:
            # Nothing usable was accepted: the runtime retries the decision; nothing runs.
            for row in rows:
                row["final"] = "rejected" if row["online"] == "rejected" else "not_observed"
            return
        packet = recovered
        sources = [int(o.index) for o in overseer.accepted_actions() if int(o.index) in decisions]
    bundle = s._decision_bundle_from_packet(packet)
    by_source = dict(enumerate(sources))
    for row in rows:
        row["final"] = "not_observed" if row["online"] == "not_observed" else "dropped"
        if row["online"] == "rejected":
            row["final"] = "rejected"
    if len(bundle) > 1 and s._multi_action_enabled():
        prevalidated: set[int] = set()
        for position, item in enumerate(bundle):
            call = item.get("tool_call") if isinstance(item.get("tool_call"), dict) else {}
            if not str(call.get("tool_id") or "").strip():
                continue
            identity = rt.early.early_tool_execution_identity(
                turn_id=turn_id, iteration=iteration, action_index=position, decision=item
            )
            if rt.early.consumed_early_tool_record(state=state, identity=identity) is not None:
                prevalidated.add(position)
        accepted_positions: list[int] = []
        _accepted, _error, extra = await s._prepare_safe_multi_action_bundle(
            bundle=bundle,
            adapters_by_id=by_id,
            # The round's exec_code_complete, true when unsaid (as Traitdeck reads a round file):
            # the exec streamer's is_complete (code captured and a contract), taken as given.
            allow_single_exec_with_code=bool(spec.get("exec_code_complete", True)),
            prevalidated_action_indices=prevalidated,
            accepted_action_indices_out=accepted_positions,
        )
        extra = extra or {}
        for item in extra.get("rejected") or []:
            row = rows[by_source[item["index"]]]
            row["backstop"] = {
                "verdict": "rejected",
                "code": item["code"],
                "extra": item.get("extra") or {},
            }
            row["final"] = "rejected"
        final_index = extra.get("final_index")
        for position in range(len(bundle)):
            row = rows[by_source[position]]
            if "backstop" in row:
                continue
            if position in accepted_positions or position == final_index:
                row["backstop"] = {"verdict": "accepted"}
                row["final"] = "accepted"
        for position in accepted_positions:
            _execute(
                rt, state, turn_id, iteration, position, bundle[position], rows[by_source[position]]
            )
        return
    first = bundle[0] if bundle else {}
    if not bundle:
        return
    row = rows[by_source[0]]
    single = copy.deepcopy(first)
    s._suppress_tool_call_final_answer(single)
    error = s._validate_decision(single)
    if error:
        row["final"] = "rejected"
        row["final_code"] = error
        return
    row["final"] = "accepted"
    if str(single.get("action") or "").strip() != "call_tool":
        return
    # The decision node's single-action checks of a call (``if not bundle_mode``): a tool the
    # ReAct loop may not call, then — unless the ledger holds the call (it was checked when it
    # started) — the tool-call protocol.
    call = single.get("tool_call") if isinstance(single.get("tool_call"), dict) else {}
    tool_id = str(call.get("tool_id") or "").strip()
    if tool_id in EXEC_ONLY_TOOLS:
        row.update(final="rejected", final_code="tool_not_allowed_in_react")
        row["final_extra"] = {"tool_id": tool_id}
        return
    record = None
    if tool_id:
        identity = rt.early.early_tool_execution_identity(
            turn_id=turn_id, iteration=iteration, action_index=0, decision=single
        )
        record = rt.early.consumed_early_tool_record(state=state, identity=identity)
    if record is None:
        verdict = s._validate_tool_call_protocol(tool_call=call, adapters_by_id=by_id)
        if not verdict.get("ok"):
            row.update(final="rejected", final_code="tool_call_invalid")
            row["final_extra"] = {
                "violations": verdict.get("violations") or [],
                "tool_id": verdict.get("tool_id"),
            }
            return
    _execute(rt, state, turn_id, iteration, 0, single, row)


async def _channel_parse_error(rt: Runtime, actions: Any, mode: str) -> str:
    """What v3's ``react_decision_stream_v2`` (→ ``workspace_streamer_v3.stream_with_channels``)
    reports for the model text of ``actions``, one ``<channel:action>`` each."""
    import importlib

    from conformance import v2_driver
    from conformance.harness import SDK

    decision = importlib.import_module(f"{SDK}.solutions.react.v3.agents.decision")
    model = v2_driver.ScriptedModel()
    model.text = v2_driver.model_text({"actions": list(actions)})
    packet = await decision.react_decision_stream_v2(
        svc=model,
        agent_name="conformance.decision",
        adapters=[],
        multi_action_mode=mode,
        user_blocks=[{"type": "text", "text": "user"}],
    )
    return str((packet.get("log") or {}).get("error") or "")


def _execute(
    rt: Runtime,
    state: dict[str, Any],
    turn_id: str,
    iteration: int,
    position: int,
    decision: dict[str, Any],
    row: dict[str, Any],
) -> None:
    call = decision.get("tool_call") if isinstance(decision.get("tool_call"), dict) else {}
    if not str(call.get("tool_id") or "").strip():
        return
    identity = rt.early.early_tool_execution_identity(
        turn_id=turn_id, iteration=iteration, action_index=position, decision=decision
    )
    record = rt.early.consumed_early_tool_record(state=state, identity=identity)
    if record is None:
        row["executed"] = {"path": "ordinary"}
        return
    row["executed"] = {
        "path": "ledger",
        "tool_call_id": record.get("tool_call_id"),
        "action_index": record.get("action_index"),
    }
