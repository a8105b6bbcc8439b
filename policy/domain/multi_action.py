"""Where a round's ``multi_action_mode`` comes from (DESIGN §2.10 item 6).

The runtime reads its deployment setting (``AI_REACT_AGENT_MULTI_ACTION``, default ``off``),
overridden by the instruction profile the user picked:
``react.<agent>.instruction_profiles.options[].multi_action_mode`` (also under ``config.react``, and
the ``default_agent`` / ``default`` blocks, in that order; ``default`` names the profile used when
none is picked). Traitdeck's dry-run takes, first found wins: the round file's own mode, the CLI's
``--multi-action-mode``, the profile (``--profile ID``, else the agent's default profile), the
``TRAITDECK_MULTI_ACTION_MODE`` setting, ``off``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from policy.domain.backstop import multi_action_enabled

__all__ = [
    "ModeSources",
    "inert_mode_keys",
    "inert_mode_message",
    "multi_action_enabled",
    "multi_action_mode",
    "profile_mode",
    "react_blocks",
    "react_config_blocks",
]


class ModeSources(NamedTuple):
    """Where a round's mode may come from besides the round itself, in precedence order: the
    explicit choice (the CLI's ``--multi-action-mode``, the API's or the playground's
    ``multi_action_mode``), the picked instruction profile's (:func:`profile_mode`) and the
    deployment setting ``TRAITDECK_MULTI_ACTION_MODE`` (read by the caller: the web from Django
    settings, the CLI from the environment). ``None``: that source says nothing."""

    explicit: str | None = None
    profile: str | None = None
    setting: str | None = None


def multi_action_mode(round_mode: str | None, sources: ModeSources) -> str:
    """The ``multi_action_mode`` a round runs with (DESIGN §2.10 item 6), the one place the order
    of sources lives: the round file's own, else the explicit choice, else the profile's, else
    the setting, else ``off``. Any string is kept (an empty one too); the runtime reads it with
    :func:`multi_action_enabled`."""
    for mode in (round_mode, *sources):
        if mode is not None:
            return mode
    return "off"


def _get(data: Any, *path: str) -> Any:
    cur = data
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def react_config_blocks(data: Any, agent: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The agent's ``react`` config blocks in the order the runtime walks them, each with the key
    path it sits at (``base_workflow._iter_react_config_blocks``): over ``react`` then
    ``config.react``, for each key (the agent id as given, its normalized form, ``default_agent``,
    ``default``) the block ``root.K`` then ``root.agents.K``, and after the keys the root itself.
    A lookup takes the first block where its key is not null."""
    name = agent.strip() or "default"
    safe = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    keys: list[str] = []
    for key in (name, safe, "default_agent", "default"):
        if key and key not in keys:
            keys.append(key)
    blocks: list[tuple[str, Mapping[str, Any]]] = []
    for root_path in ("react", "config.react"):
        root = _get(data, *root_path.split("."))
        if not isinstance(root, Mapping):
            continue
        agents = root.get("agents")
        for key in keys:
            direct = root.get(key)
            if isinstance(direct, Mapping):
                blocks.append((f"{root_path}.{key}", direct))
            nested = agents.get(key) if isinstance(agents, Mapping) else None
            if isinstance(nested, Mapping):
                blocks.append((f"{root_path}.agents.{key}", nested))
        blocks.append((root_path, root))
    return blocks


def inert_mode_keys(data: Any, agents: Any) -> list[str]:
    """The ``multi_action_mode`` keys set directly on a react block of one of ``agents`` (as key
    paths, e.g. ``react.agents.main.multi_action_mode``): KDCube's admin widget writes its
    "Multi-action" switch there, and the runtime never reads it (the mode comes from the
    instruction profile or the deployment setting)."""
    out: list[str] = []
    for agent in agents:
        for path, block in react_config_blocks(data, str(agent)):
            key = f"{path}.multi_action_mode"
            if "multi_action_mode" in block and key not in out:
                out.append(key)
    return out


def inert_mode_message(key: str) -> tuple[str, str]:
    """The ``key-inert`` warning's message and hint for a key of :func:`inert_mode_keys`."""
    return (
        f"The runtime ignores {key}: the multi-action mode comes from the instruction profile "
        "or the deployment setting, never from a react block (KDCube's admin widget writes its "
        "Multi-action switch there).",
        "Set it on an instruction profile (instruction_profiles.options[].multi_action_mode) or "
        "in AI_REACT_AGENT_MULTI_ACTION, and remove this key.",
    )


def react_blocks(data: Any, agent: str) -> list[Mapping[str, Any]]:
    """The agent's ``react`` config blocks in the runtime's precedence (:func:`react_config_blocks`
    without their paths)."""
    return [block for _path, block in react_config_blocks(data, agent)]


def profile_mode(data: Any, agent: str, profile: str | None = None) -> str | None:
    """The ``multi_action_mode`` of the picked profile (``profile``, else the declared default),
    or ``None`` when no such profile declares one."""
    for block in react_blocks(data, agent):
        profiles = block.get("instruction_profiles")
        if not isinstance(profiles, Mapping):
            continue
        options = profiles.get("options")
        if not isinstance(options, list):
            continue
        wanted = (profile or str(profiles.get("default") or "")).strip()
        if not wanted:
            continue
        for option in options:
            if isinstance(option, Mapping) and str(option.get("id") or "").strip() == wanted:
                mode = option.get("multi_action_mode")
                return None if mode is None else str(mode)
    return None
