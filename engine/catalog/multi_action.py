"""Where a round's ``multi_action_mode`` comes from (DESIGN §2.10 item 6).

The runtime reads its deployment setting (``AI_REACT_AGENT_MULTI_ACTION``, default ``off``),
overridden by the instruction profile a round applies:
``react.<agent>.instruction_profiles.options[].multi_action_mode`` in the react blocks the runtime
walks (:func:`react_config_blocks`); the agent offers the profiles of the first block with options,
a pick outside them is no pick, and that block's ``default`` (one of its own ids) applies when
none is picked. The same walk decides the catalog's form (:func:`catalog_form`). Held to the
runtime by the ``react`` conformance family. Traitdeck's dry-run takes, first found wins: the
round file's own mode, the CLI's ``--multi-action-mode``, the profile (``--profile ID``, else the
agent's default profile), the ``TRAITDECK_MULTI_ACTION_MODE`` setting, ``off``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from engine.round.backstop import multi_action_enabled
from engine.tools.named_services import DEFAULT_AGENT_KEY, DEFAULT_REACT_AGENT_ID

__all__ = [
    "AppliedProfile",
    "agent_presentation",
    "CatalogForm",
    "ModeSources",
    "ProfileSet",
    "applied_profile",
    "catalog_form",
    "instruction_profiles",
    "inert_mode_keys",
    "inert_mode_message",
    "kdcube_roster",
    "multi_action_enabled",
    "multi_action_mode",
    "profile_mode",
    "react_blocks",
    "react_agent_keys",
    "react_config_blocks",
    "react_lookup",
]

#: The two catalog renderings the runtime has (``tool_catalog_detail``).
CATALOG_DETAILS = ("full", "compact")


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
    name = agent.strip() or DEFAULT_REACT_AGENT_ID
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


def react_lookup(data: Any, agent: str, *keys: str) -> tuple[Any, str | None]:
    """The first non-null value of any of ``keys`` (dotted paths inside a block) over the agent's
    react blocks, with the key path it came from (``base_workflow._react_config_lookup``): the
    first value found wins even when the caller then finds it invalid."""
    for path, block in react_config_blocks(data, agent):
        for key in keys:
            value = _get(block, *key.split("."))
            if value is not None:
                return value, f"{path}.{key}"
    return None, None


def _norm(value: Any) -> str:
    return str(value or "").strip()


def _bool_or_none(value: Any) -> bool | None:
    """The runtime's reading of a yes/no option (``base_workflow._bool_or_none``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"1", "true", "yes", "y", "on"}:
            return True
        if text in {"0", "false", "no", "n", "off"}:
            return False
    return None


class ProfileSet(NamedTuple):
    """The instruction profiles an agent offers: those of the **first** react block whose
    ``instruction_profiles.options`` names at least one id (``agent_inventory
    .react_instruction_profiles``); ``default`` only when it is one of that block's own ids."""

    ids: tuple[str, ...]
    default: str | None
    path: str


def instruction_profiles(data: Any, agent: str) -> ProfileSet | None:
    for path, block in react_config_blocks(data, agent):
        raw = block.get("instruction_profiles")
        if not isinstance(raw, Mapping) or not isinstance(raw.get("options"), list):
            continue
        ids = [
            _norm(row.get("id"))
            for row in raw["options"]
            if isinstance(row, Mapping) and _norm(row.get("id"))
        ]
        if not ids:
            continue
        default = _norm(raw.get("default")) or None
        return ProfileSet(
            tuple(ids), default if default in ids else None, f"{path}.instruction_profiles"
        )
    return None


class AppliedProfile(NamedTuple):
    """The profile a round runs with: the user's pick when it is one of the offered ids, else the
    offered default; its option is the first with that id over all the blocks
    (``resolve_react_instruction_profile``), ``path`` where that option sits."""

    id: str
    option: Mapping[str, Any]
    path: str
    picked: bool


def applied_profile(data: Any, agent: str, pick: str | None = None) -> AppliedProfile | None:
    profiles = instruction_profiles(data, agent)
    if profiles is None:
        return None
    wanted = _norm(pick)
    picked = bool(wanted) and wanted in profiles.ids
    applied = wanted if picked else profiles.default
    if not applied:
        return None
    for path, block in react_config_blocks(data, agent):
        raw = block.get("instruction_profiles")
        if not isinstance(raw, Mapping):
            continue
        options = raw.get("options") or []
        if not isinstance(options, list | tuple | str | Mapping):
            return None  # the runtime's walk raises here and it falls back to no profile
        for n, row in enumerate(options):
            if isinstance(row, Mapping) and _norm(row.get("id")) == applied:
                return AppliedProfile(
                    applied, row, f"{path}.instruction_profiles.options[{n}]", picked
                )
    return None


def profile_mode(data: Any, agent: str, profile: str | None = None) -> str | None:
    """The ``multi_action_mode`` of the applied profile (:func:`applied_profile`: ``profile`` when
    offered, else the declared default) as the runtime keeps it (trimmed; empty is ``off``), or
    ``None`` when that profile declares none."""
    applied = applied_profile(data, agent, profile)
    mode = None if applied is None else applied.option.get("multi_action_mode")
    return None if mode is None else (str(mode).strip() or "off")


class CatalogForm(NamedTuple):
    """Which catalog the model of an agent reads (``base_workflow.build_react``): ``detail``
    (``full`` or ``compact``) and where it came from, whether there is a catalog at all, and the
    default KDCube's picker shows (it skips invalid values where the runtime does not)."""

    detail: str
    detail_source: str
    include: bool
    include_source: str
    picker_default: str


def catalog_form(
    data: Any, agent: str, *, detail: str | None = None, profile: str | None = None
) -> CatalogForm:
    """``detail``: the end user's pick for the conversation (any case; an invalid one is no
    pick); ``profile``: the picked instruction profile (else the default one)."""
    applied = applied_profile(data, agent, profile)
    option: Mapping[str, Any] = applied.option if applied is not None else {}
    pick = _norm(detail).lower()
    if pick in CATALOG_DETAILS:
        raw, source = pick, "the conversation's pick"
    elif applied is not None and _norm(option.get("tool_catalog_detail")):
        raw = _norm(option.get("tool_catalog_detail"))
        source = f"{applied.path}.tool_catalog_detail"
    else:
        value, path = react_lookup(data, agent, "instructions.tool_catalog_detail")
        raw = str(value or "full").strip().lower()
        source = path or "the runtime's default"
    include = _bool_or_none(option.get("include_tool_catalog")) if applied is not None else None
    include_source = f"{applied.path}.include_tool_catalog" if applied is not None else ""
    if include is None:
        value, path = react_lookup(data, agent, "instructions.include_tool_catalog")
        include, include_source = _bool_or_none(value), path or ""
    if include is None:
        include, include_source = True, "the runtime's default"
    picker = "full"
    for block in react_blocks(data, agent):
        instructions = block.get("instructions")
        value = (
            instructions.get("tool_catalog_detail") if isinstance(instructions, Mapping) else None
        )
        if _norm(value).lower() in CATALOG_DETAILS:
            picker = _norm(value).lower()
            break
    return CatalogForm(
        raw if raw in CATALOG_DETAILS else "full", source, include, include_source, picker
    )


def agent_presentation(data: Any, agent: str, *, mode_setting: str | None) -> dict[str, Any]:
    """What the runtime decides for an agent's rounds when the end user picks nothing (the
    default profile applies): the catalog's form and the multi-action mode, each with its
    source (``traitdeck effective --format json``, ``GET …/effective``)."""
    form = catalog_form(data, agent)
    applied = applied_profile(data, agent)
    mode = profile_mode(data, agent)
    if mode is not None and applied is not None:
        mode_source = f"{applied.path}.multi_action_mode"
    elif mode_setting is not None:
        mode, mode_source = mode_setting, "the setting TRAITDECK_MULTI_ACTION_MODE"
    else:
        mode, mode_source = "off", "the runtime's default (AI_REACT_AGENT_MULTI_ACTION=off)"
    return {
        "instruction_profile": None if applied is None else applied.id,
        "tool_catalog_detail": form.detail,
        "tool_catalog_detail_source": form.detail_source,
        "include_tool_catalog": form.include,
        "include_tool_catalog_source": form.include_source,
        "multi_action_mode": mode,
        "multi_action_mode_effective": "on" if multi_action_enabled(mode) else "off",
        "multi_action_mode_source": mode_source,
    }


#: ``react`` root keys that are configuration, not agents (KDCube's admin widget,
#: ``components-react/src/agentic-config/api.ts`` ``NON_AGENT_REACT_KEYS`` at the recorded commit).
NON_AGENT_REACT_KEYS = frozenset(
    {
        "agents",
        "instructions",
        "instruction_profiles",
        "story_snapshots",
        "event_source_pipeline",
        "supported_models",
        "role_models",
        "subagents",
        "render_thinking",
        "line_numbers_mode",
        "multi_action_mode",
        "model",
    }
)


def _js_key_order(keys: list[str]) -> list[str]:
    """``keys`` in JavaScript's ``Object.keys`` order: the widget runs in a browser, where keys
    that are array indices (``"0"``, ``"10"``; not ``"07"`` or ``"-1"``) come first, ascending,
    then the rest as written."""

    def index(key: str) -> int | None:
        if key.isdigit() and key.isascii() and str(int(key)) == key and int(key) < 2**32 - 1:
            return int(key)
        return None

    indices = sorted((i, k) for k in keys if (i := index(k)) is not None)
    return [k for _i, k in indices] + [k for k in keys if index(k) is None]


def react_agent_keys(data: Any) -> list[tuple[str, str]]:
    """The agents KDCube's widget lists from the react config (issue 37 §4; ``getAppAgents``):
    each mapping under ``react.agents`` (``agents``), then each mapping directly under ``react``
    whose key is not configuration (``root``), each group in JavaScript's key order. It reads
    ``react`` only, never ``config.react``; the widget's own fallback (``default_agent`` when it
    finds none) is not an agent here (:func:`kdcube_roster` has it)."""
    react = data.get("react") if isinstance(data, Mapping) else None
    if not isinstance(react, Mapping):
        return []
    out: list[tuple[str, str]] = []
    container = react.get("agents")
    if isinstance(container, Mapping):
        named = {str(k): v for k, v in container.items()}
        out += [(k, "agents") for k in _js_key_order(list(named)) if isinstance(named[k], Mapping)]
    at_root = {str(k): v for k, v in react.items()}
    out += [
        (k, "root")
        for k in _js_key_order(list(at_root))
        if k not in NON_AGENT_REACT_KEYS and isinstance(at_root[k], Mapping)
    ]
    return out


class RosterEntry(NamedTuple):
    """One agent of KDCube's roster: where its react block lives (``agents``: under
    ``react.agents``, ``root``: directly under ``react``, ``None``: no react block) and whether
    ``surfaces.as_consumer.agents`` has an entry for it."""

    name: str
    react_container: str | None
    has_consumer: bool
    fallback: bool = False


def kdcube_roster(data: Any) -> list[RosterEntry]:
    """The agents KDCube's admin widget lists (``getAgentProfiles``; recorded by the ``roster``
    conformance family): the react slots of :func:`react_agent_keys` — or, when there is none,
    the widget's ``default_agent`` slot (``fallback``) — then every key of
    ``surfaces.as_consumer.agents`` (whatever its value) that is not already listed."""
    slots = react_agent_keys(data)
    entries = {
        name: RosterEntry(name, container, False, not slots)
        for name, container in (slots or [(DEFAULT_AGENT_KEY, "root")])
    }
    surfaces = data.get("surfaces") if isinstance(data, Mapping) else None
    consumer = surfaces.get("as_consumer") if isinstance(surfaces, Mapping) else None
    agents = consumer.get("agents") if isinstance(consumer, Mapping) else None
    for name in _js_key_order([str(k) for k in agents] if isinstance(agents, Mapping) else []):
        known = entries.get(name)
        entries[name] = (
            known._replace(has_consumer=True) if known else RosterEntry(name, None, True)
        )
    return list(entries.values())
