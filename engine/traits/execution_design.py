"""Execution design: how a tool stays safe under retries (DESIGN §2.8, Traitdeck's extension).

A connection may carry ``tool_execution: {<callable>: {timeout_s, mode, retry, confirm,
async_alternative, status_tool, compensation}}``. The runtime ignores it; Traitdeck keeps it beside
the traits, checks it, and uses it in the dry-run and the timeout message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.numbers import is_bounded, show_number

MODES: Final = ("sync", "async_job", "streaming", "event")
RETRIES: Final = ("natural_key", "idempotency_key", "dedup", "not_safe")
#: Retry stories that make a repeated call harmless.
SAFE_RETRIES: Final = frozenset({"natural_key", "idempotency_key", "dedup"})
#: Past this, a synchronous call should become an async job (the seed's 30 s tool cap).
SYNC_LIMIT_S: Final = 30
DEFAULT_MODE: Final = "sync"
TOOL_REFERENCE_FIELDS: Final = ("async_alternative", "status_tool", "compensation")
FIELDS: Final = ("timeout_s", "mode", "retry", "confirm", *TOOL_REFERENCE_FIELDS)


@dataclass(frozen=True)
class ExecutionDesign:
    """The well-formed part of one tool's design; a field with a wrong value counts as unset."""

    timeout_s: float | None = None
    mode: str | None = None
    retry: str | None = None
    confirm: bool | None = None
    async_alternative: str | None = None
    status_tool: str | None = None
    compensation: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def effective_mode(self) -> str:
        """Synchronous unless said otherwise (the seed: "default to synchronous")."""
        return self.mode or DEFAULT_MODE

    @property
    def has_retry_story(self) -> bool:
        return self.retry in SAFE_RETRIES

    @property
    def gated(self) -> bool:
        return self.confirm is True


@dataclass(frozen=True)
class DesignProblem:
    """A field whose value Traitdeck cannot use (``execution-design-value``)."""

    field: str
    message: str
    hint: str


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> DesignProblem | None:
    if isinstance(value, str) and value in choices:
        return None
    return DesignProblem(
        name,
        f"{name} is {value!r}, which is not one of {', '.join(choices)}.",
        f"Set {name} to one of: {', '.join(choices)}.",
    )


def parse_design(raw: Any) -> tuple[ExecutionDesign, list[DesignProblem]]:
    """Read one ``tool_execution`` entry: the usable design, and a problem per bad field.

    A non-mapping entry gives an empty design (the validator reports it as ``shape``).
    """
    if not isinstance(raw, Mapping):
        return ExecutionDesign(), []
    problems: list[DesignProblem] = []
    values: dict[str, Any] = {}

    if "timeout_s" in raw:
        timeout = raw["timeout_s"]
        if is_positive_number(timeout):
            values["timeout_s"] = float(timeout)
        else:
            problems.append(
                DesignProblem(
                    "timeout_s",
                    f"timeout_s is {show_number(timeout)}; it must be a positive number of"
                    " seconds.",
                    "Set timeout_s to the worst-case wall-clock time in seconds, e.g. 20.",
                )
            )
    for name, choices in (("mode", MODES), ("retry", RETRIES)):
        if name in raw:
            problem = _choice(raw[name], name, choices)
            if problem is None:
                values[name] = raw[name]
            else:
                problems.append(problem)
    if "confirm" in raw:
        if isinstance(raw["confirm"], bool):
            values["confirm"] = raw["confirm"]
        else:
            problems.append(
                DesignProblem(
                    "confirm",
                    f"confirm is {raw['confirm']!r}; it must be true or false.",
                    "Write confirm: true to require a confirmation gate, or remove it.",
                )
            )
    for name in TOOL_REFERENCE_FIELDS:
        if name in raw:
            value = raw[name]
            if isinstance(value, str) and value.strip():
                values[name] = value.strip()
            else:
                problems.append(
                    DesignProblem(
                        name,
                        f"{name} is {value!r}; it must name a tool.",
                        f"Set {name} to the callable or tool id of the tool, or remove it.",
                    )
                )
    extra = {key: value for key, value in raw.items() if key not in FIELDS}
    return ExecutionDesign(extra=extra, **values), problems


def is_positive_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # An int is finite by nature; math.isfinite would convert it to a float first, which
    # raises OverflowError beyond ~1e308. One that large is still refused: by its bound.
    return is_bounded(value) and value > 0 and (isinstance(value, int) or math.isfinite(value))


def timeout_message(tool_id: str, design: ExecutionDesign, elapsed_s: float | None = None) -> str:
    """The retryable error a timeout produces: it names the limit and the async alternative."""
    limit = f"{design.timeout_s:g} s" if design.timeout_s is not None else "its time limit"
    took = f" after {elapsed_s:g} s" if elapsed_s is not None else ""
    text = f"{tool_id} timed out{took} (limit {limit}); the call may be retried."
    if design.async_alternative:
        text += f" For long work use the async alternative {design.async_alternative}."
    return text
