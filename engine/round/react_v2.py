"""What KDCube's **v2** react agent (its default, ``AI_REACT_AGENT_VERSION = v2``) does with a
round (issue 37 §0; recorded by the ``v2`` conformance family through v2's real decision node).

v2's protocol is single-action. Each attempt of a round is one answer of the model to the same
question: a decision. Per decision, in the node's order:

1. the channel streamer: two or more ``<channel:action>`` instances are
   ``multiple_channel_instances:N``; a ``call_tool`` whose ``params`` is not an object, a
   ``notes`` that is not text or a call without ``tool_id`` fails the action model — each is an
   ``action_schema_error`` and **nothing runs**;
2. ``_validate_decision`` (``final_answer_with_tool_call``, ``final_answer_required``, …);
3. ``ctx_tools.fetch_ctx`` is ``tool_not_allowed_in_react``;
4. ``_validate_tool_call_protocol``: an unknown tool (v2 knows the configured tools and nine
   ``react.*`` ids, not ``react.delegate``/``react.contribute``) is ``tool_call_invalid``;
5. the signature check: a tool the tool subsystem does not know is ``tool_signature_red``
   (a known tool's params are not checked here: Traitdeck has no signatures).

Each failure asks the model again while the turn has a protocol retry left (2 per turn, never
reset; and ``iteration + 1 < max_iterations``), else the turn exits. A failure at step 4 that
retries still reaches step 5, so an unknown tool spends both retries in one decision. There is
no overseer, no strategy check, no early start, no ledger and no multi-action bundle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from engine.round.backstop import EXEC_ONLY_TOOLS, TOOL_NOT_ALLOWED, validate_decision
from engine.round.overseer import Action

__all__ = [
    "MAX_DECISION_RETRIES",
    "MAX_ITERATIONS",
    "V2Decision",
    "run_v2",
    "v2_answer",
    "v2_protocol_violations",
]

#: ``prepare_session``: ``max_decision_retries=2`` per turn.
MAX_DECISION_RETRIES: Final = 2
#: The runtime's ``AI_REACT_MAX_ITERATIONS`` default (``_react_max_iterations``).
MAX_ITERATIONS: Final = 15
SCHEMA_ERROR: Final = "action_schema_error"
TOOL_CALL_INVALID: Final = "tool_call_invalid"
SIGNATURE_RED: Final = "tool_signature_red"
#: The ``react.*`` ids v2's ``_validate_tool_call_protocol`` knows.
V2_REACT_TOOLS: Final = frozenset(
    {
        "react.read",
        "react.pull",
        "react.checkout",
        "react.write",
        "react.plan",
        "react.hide",
        "react.memsearch",
        "react.patch",
        "react.rg",
    }
)
_ACTION_WORDS: Final = frozenset({"call_tool", "complete", "exit"})


@dataclass(frozen=True)
class V2Decision:
    """What v2's decision node did with one answer of the model.

    ``route``: ``tool_execution`` (``runs`` names the tool), ``decision`` (the model is asked
    again) or ``exit`` (``exit``: ``complete``/``exit`` for the model's own final answer, else the
    code the turn failed with). ``notices``: the ``protocol_violation.*`` codes put in the
    timeline, in order; ``retries``: protocol retries spent in the turn after this decision."""

    route: str
    notices: tuple[str, ...] = ()
    retries: int = 0
    runs: str | None = None
    exit: str | None = None
    channel_instances: int | None = None
    schema: str | None = None


def _schema_error(actions: Sequence[Action]) -> tuple[str | None, int | None]:
    """The streamer's and the action model's verdict: ``(kind, channel instances)``."""
    if len(actions) > 1:
        return "multiple_channel_instances", len(actions)
    if not actions:
        return None, None
    action = actions[0]
    if action.action not in _ACTION_WORDS:  # the model's Literal, before any trimming
        return "schema", None
    if action.tool_id is not None or action.has_params:  # a tool_call object
        if action.tool_id is None:
            return "schema", None
        if action.has_params and not isinstance(action.params, Mapping):
            return "schema", None
    return None, None


def v2_protocol_violations(action: Action, known: frozenset[str]) -> bool:
    """Whether v2's ``_validate_tool_call_protocol`` finds a violation for the call (``known``:
    the configured tool ids)."""
    from engine.round.backstop import validate_protocol
    from engine.traits.round_policy import RoundPolicy

    if action.tool not in known and action.tool not in V2_REACT_TOOLS:
        return True
    # The parameter checks (react.read's paths, the exec contract) are v3's too.
    return bool(validate_protocol(action, RoundPolicy({t: {} for t in known}, {})))


def run_v2(
    attempts: Sequence[Sequence[Action]],
    known: frozenset[str],
    *,
    iteration: int = 0,
    retries: int = 0,
    max_iterations: int = MAX_ITERATIONS,
) -> list[V2Decision]:
    """Per attempt (one answer of the model each), until a tool runs or the turn exits.
    ``known``: the agent's configured tool ids; ``retries``: protocol retries the turn has
    already spent (a round file cannot tell: 0)."""
    out: list[V2Decision] = []
    for actions in attempts:
        decision, retries = _decide(actions, known, iteration, retries, max_iterations)
        out.append(decision)
        iteration += 1
        if decision.route != "decision":
            break
    return out


def _decide(
    actions: Sequence[Action], known: frozenset[str], iteration: int, retries: int, limit: int
) -> tuple[V2Decision, int]:
    notices: list[str] = []
    retried = False

    def retry_or_exit(code: str) -> bool:
        """Spend a retry (True) or give up (False)."""
        nonlocal retries, retried
        notices.append(code)
        if retries < MAX_DECISION_RETRIES and iteration + 1 < limit:
            retries += 1
            retried = True
            return True
        return False

    schema, instances = _schema_error(actions)
    if schema is not None:
        again = retry_or_exit(SCHEMA_ERROR)
        decision = V2Decision(
            "decision" if again else "exit",
            tuple(notices),
            retries,
            exit=None if again else SCHEMA_ERROR,
            channel_instances=instances,
            schema=schema,
        )
        return decision, retries
    action = actions[0] if actions else Action("", None)
    error = validate_decision(action)
    if error is not None:
        again = retry_or_exit(error)
        decision = V2Decision(
            "decision" if again else "exit", tuple(notices), retries, exit=None if again else "exit"
        )
        return decision, retries
    if action.name != "call_tool":
        return V2Decision("exit", (), retries, exit=action.name), retries
    tool, word, code = action.tool, "call_tool", ""
    if tool in EXEC_ONLY_TOOLS and not retry_or_exit(TOOL_NOT_ALLOWED):
        word, code = "exit", TOOL_NOT_ALLOWED
    if (
        word == "call_tool"
        and v2_protocol_violations(action, known)
        and not retry_or_exit(TOOL_CALL_INVALID)
    ):
        word, code, tool = "exit", TOOL_CALL_INVALID, ""
    # The signature check runs on whatever tool id is left, even after an exit.
    unknown = bool(tool) and not tool.startswith("react.") and tool not in known
    if unknown and not retry_or_exit(SIGNATURE_RED):
        word, code = "exit", SIGNATURE_RED
    # A retry asked for earlier in the decision wins over a later exit (the node routes on its
    # retry flag first).
    if retried:
        return V2Decision("decision", tuple(notices), retries), retries
    if word == "exit":
        return V2Decision("exit", tuple(notices), retries, exit=code), retries
    return V2Decision("tool_execution", (), retries, runs=tool), retries


def v2_answer(decision: V2Decision) -> dict[str, object]:
    """A decision as JSON (the dry-run's ``v2`` rows and the conformance family's answer)."""
    return {
        "route": decision.route,
        "schema": decision.schema,
        "channel_instances": decision.channel_instances,
        "notices": list(decision.notices),
        "retries": decision.retries,
        "runs": decision.runs,
        "exit": decision.exit,
    }
