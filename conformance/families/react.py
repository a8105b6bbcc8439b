"""React config blocks as the runtime walks them (DESIGN §7 "React config blocks", issue 37 §3):
the blocks of an agent in order, the instruction profiles it offers, the one a round applies, and
what that leaves for ``multi_action_mode``, ``tool_catalog_detail`` and ``include_tool_catalog`` —
against Traitdeck's ``engine.catalog.multi_action``.

Runtime entry points: ``base_workflow._iter_react_config_blocks`` / ``_react_config_lookup`` /
``_instruction_profile_runtime_options`` / ``_bool_or_none``, ``agent_inventory
._react_agent_config_blocks`` / ``react_instruction_profiles`` / ``match_instruction_profile`` /
``resolve_react_instruction_profile`` / ``normalize_presentation_pick`` /
``react_presentation_facets``. Glue: ``build_react`` computes the catalog's form inline
(~3287–3320); :func:`_build_react_catalog` restates those lines over the runtime's own
functions, and ``apply_user_agent_selection``'s pick → applied profile (~2989–3027) likewise.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

NAME = "react"
MIN_CASES = 200

#: A setting value the recorder hands the runtime for ``AI_REACT_AGENT_MULTI_ACTION``: a mode
#: equal to it means "no profile said anything".
SETTING = "<setting>"

AGENTS = ["main", "my-agent", "my_agent", "", " main ", "default_agent", "x.y"]
PICKS: list[Any] = [None, "fast", " fast ", "Fast", "full", "ghost", ""]
DETAIL_PICKS: list[Any] = [None, "compact", " Compact ", "full", "wide"]


def _profiles(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    options: list[Any] = []
    for pid in ids:
        option: dict[str, Any] = {"id": rng.choice([pid, f" {pid} ", pid])}
        if rng.random() < 0.6:
            option["multi_action_mode"] = rng.choice(
                ["on", "off", "", "  ", "safe_fanout", True, False, " On ", None, "bogus"]
            )
        if rng.random() < 0.5:
            option["tool_catalog_detail"] = rng.choice(
                ["compact", "Compact", "full", "", "wide", " compact ", None]
            )
        if rng.random() < 0.4:
            option["include_tool_catalog"] = rng.choice(
                [False, True, "no", "yes", "maybe", 0, 1, None]
            )
        options.append(option)
    if rng.random() < 0.15:
        options.insert(0, rng.choice([{"label": "no id"}, "text", {"id": "  "}]))
    block: dict[str, Any] = {"options": options}
    if rng.random() < 0.8:
        block["default"] = rng.choice([*ids, "ghost", "", f" {ids[0]} "])
    return block


def _block(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if rng.random() < 0.55:
        block["instruction_profiles"] = _profiles(rng, ids)
    if rng.random() < 0.55:
        instructions: dict[str, Any] = {}
        if rng.random() < 0.8:
            instructions["tool_catalog_detail"] = rng.choice(
                ["compact", "full", "Compact", " COMPACT ", "wide", "", None]
            )
        if rng.random() < 0.5:
            instructions["include_tool_catalog"] = rng.choice(
                [False, True, "off", "on", "maybe", None]
            )
        block["instructions"] = instructions
    if rng.random() < 0.2:
        block["multi_action_mode"] = "on"
    return block


def _root(rng: random.Random, keys: list[str]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for key in rng.sample(keys, rng.randint(0, 3)):
        root[key] = _block(rng, rng.choice([["fast", "full"], ["full"], ["lite", "fast"]]))
    if rng.random() < 0.5:
        root["agents"] = {
            key: _block(rng, rng.choice([["fast", "full"], ["full"]]))
            for key in rng.sample(keys, rng.randint(1, 3))
        }
    if rng.random() < 0.3:
        root.update(_block(rng, ["fast", "root"]))
    return root


def _hand_cases() -> list[tuple[str, dict[str, Any]]]:
    fast = {"id": "fast", "multi_action_mode": "on", "tool_catalog_detail": "compact"}
    return [
        (
            "profile-compact-is-trimmed-not-lowercased",
            {
                "react": {
                    "main": {
                        "instruction_profiles": {
                            "default": "p",
                            "options": [{"id": "p", "tool_catalog_detail": "Compact"}],
                        }
                    }
                }
            },
        ),
        (
            "block-compact-is-lowercased",
            {"react": {"main": {"instructions": {"tool_catalog_detail": " Compact "}}}},
        ),
        (
            "first-value-wins-even-invalid",
            {
                "react": {
                    "main": {"instructions": {"tool_catalog_detail": "wide"}},
                    "default": {"instructions": {"tool_catalog_detail": "compact"}},
                }
            },
        ),
        (
            "whole-react-root-before-config-react",
            {
                "react": {"instructions": {"tool_catalog_detail": "full"}},
                "config": {"react": {"main": {"instructions": {"tool_catalog_detail": "compact"}}}},
            },
        ),
        (
            "agents-dash-beats-underscore",
            {
                "react": {
                    "my_agent": {"instructions": {"tool_catalog_detail": "full"}},
                    "agents": {"my-agent": {"instructions": {"tool_catalog_detail": "compact"}}},
                }
            },
        ),
        (
            "first-block-with-options-wins-default-in-own-ids",
            {
                "react": {
                    "main": {
                        "instruction_profiles": {"default": "fast", "options": [{"id": "full"}]}
                    },
                    "default": {"instruction_profiles": {"default": "fast", "options": [fast]}},
                }
            },
        ),
        (
            "first-block-without-default-hides-later-default",
            {
                "react": {
                    "main": {"instruction_profiles": {"options": [{"id": "full"}]}},
                    "default": {"instruction_profiles": {"default": "fast", "options": [fast]}},
                }
            },
        ),
        (
            "empty-mode-is-off-true-is-True",
            {
                "react": {
                    "main": {
                        "instruction_profiles": {
                            "default": "fast",
                            "options": [
                                {"id": "fast", "multi_action_mode": ""},
                                {"id": "full", "multi_action_mode": True},
                            ],
                        }
                    }
                }
            },
        ),
        (
            "mode-in-a-react-block-is-read-by-nothing",
            {"react": {"agents": {"main": {"multi_action_mode": "on"}}}},
        ),
        (
            "catalog-off-in-instructions",
            {"react": {"main": {"instructions": {"include_tool_catalog": False}}}},
        ),
        (
            "catalog-off-in-profile",
            {
                "react": {
                    "main": {
                        "instruction_profiles": {
                            "default": "fast",
                            "options": [{"id": "fast", "include_tool_catalog": "no"}],
                        }
                    }
                }
            },
        ),
        ("no-react", {"tools": {}}),
        ("react-not-a-mapping", {"react": ["x"]}),
    ]


def _random_cases(n: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(37)
    keys = ["main", "my-agent", "my_agent", "default_agent", "default", "x.y", "x_y", "other"]
    out: list[tuple[str, dict[str, Any]]] = []
    for number in range(n):
        data: dict[str, Any] = {}
        if rng.random() < 0.9:
            data["react"] = _root(rng, keys)
        if rng.random() < 0.5:
            data["config"] = {"react": _root(rng, keys)}
        out.append((f"random-{number:03d}", data))
    return out


def inputs() -> list[dict[str, Any]]:
    rng = random.Random(3737)
    out = []
    for name, data in _hand_cases():
        for agent in ("main", "my-agent"):
            for pick in (None, "fast", "full"):
                for detail in (None, "compact"):
                    out.append(
                        {
                            "id": f"{name}:{agent}:{pick}:{detail}",
                            "props": data,
                            "agent": agent,
                            "pick": pick,
                            "detail": detail,
                        }
                    )
    for name, data in _random_cases(160):
        agent = rng.choice(AGENTS)
        out.append(
            {
                "id": f"{name}:{agent}",
                "props": data,
                "agent": agent,
                "pick": rng.choice(PICKS),
                "detail": rng.choice(DETAIL_PICKS),
            }
        )
    return out


def _build_react_catalog(
    bw: Any, inv: Any, props: Any, agent: str, profile: Any, detail: Any
) -> tuple[str, bool]:
    """``build_react``'s lines for the catalog (~3287–3320) over the runtime's functions, with
    no catalog argument from the caller (the default)."""

    def first(*keys: str) -> Any:
        return bw._react_config_lookup(props, *keys, agent_id=agent)[0]

    applied = isinstance(profile, dict)
    include, _gallery, _mode = bw._instruction_profile_runtime_options(
        profile if applied else None,
        applied=applied,
        include_tool_catalog=None,
        include_skill_gallery=None,
        configured_multi_action_mode=SETTING,
    )
    pick = inv.normalize_presentation_pick({"tool_catalog": detail}) or {}
    catalog_detail = str(pick.get("tool_catalog") or "").strip() or None
    if applied and catalog_detail is None:
        catalog_detail = str(profile.get("tool_catalog_detail") or "").strip() or None
    if catalog_detail is None:
        catalog_detail = str(first("instructions.tool_catalog_detail") or "full").strip().lower()
    if catalog_detail not in {"full", "compact"}:
        catalog_detail = "full"
    if include is None:
        include = bw._bool_or_none(first("instructions.include_tool_catalog"))
    if include is None:
        include = True
    return catalog_detail, bool(include)


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance.harness import SDK

    bw = importlib.import_module(f"{SDK}.solutions.chatbot.base_workflow")
    inv = importlib.import_module(f"{SDK}.runtime.agent_inventory")
    out = []
    for case in inputs():
        props, agent, pick = case["props"], case["agent"], case["pick"]
        blocks = [path for path, _block in bw._iter_react_config_blocks(props, agent_id=agent)]
        assert [b for _p, b in bw._iter_react_config_blocks(props, agent_id=agent)] == list(
            inv._react_agent_config_blocks(props, agent)
        )
        profiles = inv.react_instruction_profiles(props, agent)
        # apply_user_agent_selection: the pick clamped to the offered ids, else the default.
        matched = inv.match_instruction_profile(pick, profiles)
        applied_id = (matched or (profiles or {}).get("default")) if profiles else None
        try:
            resolved = (
                inv.resolve_react_instruction_profile(props, agent, applied_id)
                if applied_id
                else None
            )
        except Exception:  # the runtime fails open to no profile
            resolved = None
        _inc, _gal, mode = bw._instruction_profile_runtime_options(
            resolved,
            applied=resolved is not None,
            include_tool_catalog=None,
            include_skill_gallery=None,
            configured_multi_action_mode=SETTING,
        )
        detail, include = _build_react_catalog(bw, inv, props, agent, resolved, case["detail"])
        picker = inv.react_presentation_facets(props, agent)["facets"]["tool_catalog"]["default"]
        out.append(
            {
                "id": case["id"],
                "input": {k: v for k, v in case.items() if k != "id"},
                "runtime": {
                    "blocks": blocks,
                    "profiles": None
                    if profiles is None
                    else {
                        "ids": [o["id"] for o in profiles["options"]],
                        "default": profiles["default"],
                    },
                    "applied": applied_id if resolved is not None else None,
                    "multi_action_mode": None if mode == SETTING else mode,
                    "tool_catalog_detail": detail,
                    "include_tool_catalog": include,
                    "picker_default": picker,
                },
            }
        )
    return out


def predict(case: dict[str, Any]) -> Any:
    from engine.catalog import multi_action as ma

    props, agent, pick = case["props"], case["agent"], case["pick"]
    profiles = ma.instruction_profiles(props, agent)
    applied = ma.applied_profile(props, agent, pick)
    form = ma.catalog_form(props, agent, detail=case["detail"], profile=pick)
    return {
        "blocks": [path for path, _block in ma.react_config_blocks(props, agent)],
        "profiles": None
        if profiles is None
        else {"ids": list(profiles.ids), "default": profiles.default},
        "applied": None if applied is None else applied.id,
        "multi_action_mode": ma.profile_mode(props, agent, pick),
        "tool_catalog_detail": form.detail,
        "include_tool_catalog": form.include,
        "picker_default": form.picker_default,
    }
