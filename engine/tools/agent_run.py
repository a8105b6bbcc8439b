"""Which agent's tools the runtime runs an agent id with: the one resolution every prediction
(effective traits, catalog, dry-run, playground, replay, suites, impact, drift, the simulator)
goes through.

The runtime never refuses an agent id: it tries the id, its normalized forms, then
``default_agent``, ``main`` and ``default`` in ``surfaces.as_consumer.agents`` (an entry counts
only with a ``tools`` list), then the legacy ``tools.agents`` without ``main``
(``tool_config._agent_keys`` / ``_legacy_agent_keys``). A prediction for an id the config does not
name follows it and says so (``agent-resolved``); editing routes still answer 404 for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.document.diagnostics import Diagnostic, Severity
from engine.document.paths import AGENTS, format_path
from engine.tools.loading import agent_keys
from engine.tools.manifest import Manifest
from engine.tools.resolution import AgentResolution, agents_mapping, resolve_consumer
from engine.traits.builtins import DEFAULT_ROLE

CODE = "agent-resolved"


@dataclass(frozen=True)
class AgentRun:
    """An agent id as the runtime runs it."""

    agent: str
    resolution: AgentResolution
    #: The agent whose tools the runtime reads (``None``: no agent matches, built-ins only).
    resolved_agent: str | None
    #: The config names ``agent`` itself (in ``agents`` or the legacy ``tools.agents``).
    named: bool
    diagnostics: tuple[Diagnostic, ...] = ()


def named_agents(data: Any) -> list[str]:
    """The agent ids a policy names: ``surfaces.as_consumer.agents`` and legacy ``tools.agents``."""
    names = [str(key) for key in agents_mapping(data)]
    tools = data.get("tools") if isinstance(data, Mapping) else None
    legacy = tools.get("agents") if isinstance(tools, Mapping) else None
    if isinstance(legacy, Mapping):
        names += [str(key) for key in legacy if str(key) not in names]
    return names


def agent_run(
    data: Any, agent: str, manifest: Manifest | None = None, *, role: str | None = DEFAULT_ROLE
) -> AgentRun:
    """The tools the runtime offers when it runs ``agent`` (any id), which agent's they are, and
    the ``agent-resolved`` info when the config does not name ``agent``."""
    resolution = resolve_consumer(data, agent, manifest, role=role, label=agent)
    resolved = None if resolution.loaded_from is None else str(resolution.loaded_from)
    named = agent in named_agents(data)
    if named:
        return AgentRun(agent, resolution, resolved, True)
    legacy = resolution.legacy
    tried = ", ".join(agent_keys(agent, legacy=legacy))
    if resolved is None:
        message = (
            f"The config names no agent {agent!r} and none of the ids the runtime tries ({tried}) "
            "has a tools list: the runtime runs it with the built-in tools only."
        )
    else:
        where = f"tools.agents.{resolved}" if legacy else f"agents.{resolved}"
        message = (
            f"The config names no agent {agent!r}: the runtime runs agent {agent!r} with agent "
            f"{resolved!r}'s tools ({where}; it tries {tried} in that order)."
        )
    hint = f"Add agent {agent!r} to the policy if it should have tools of its own."
    diagnostic = Diagnostic(Severity.INFO, CODE, format_path(AGENTS), None, None, message, hint)
    return AgentRun(agent, resolution, resolved, False, (diagnostic,))
