"""The compact catalog (issue 37 §2): what ``layout.build_compact_tools_block`` renders for the
model when ``tool_catalog_detail`` is ``compact`` — the tool ids in order, each with its
namespaces, and no ``Scope:`` block or trait line at all — for every ``catalog`` input, against
Traitdeck's resolution (the same listing the full catalog draws)."""

from __future__ import annotations

import re
from typing import Any

NAME = "compact"
MIN_CASES = 60

#: Words of a Scope block or a trait line (none may appear in the compact form).
TRAIT_WORDS = re.compile(r"Scope:|strategy|exploration|exploitation|early|parallel_with_generation")


def read_compact(text: str) -> dict[str, Any]:
    tools: list[dict[str, Any]] = []
    for line in text.split("\n"):
        if line.startswith("- "):
            tools.append({"id": line[2:].removesuffix(" [async]"), "namespaces": []})
        elif line.startswith("  namespaces: ") and tools:
            tools[-1]["namespaces"] = line.removeprefix("  namespaces: ").split(", ")
    return {
        "header": text.split("\n", 1)[0] if text else "",
        "tools": tools,
        "trait_lines": bool(TRAIT_WORDS.search(text.split("\n", 3)[-1] if text else "")),
    }


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance.families.catalog import all_catalog_inputs
    from conformance.families.config import canonical
    from conformance.runtime_policy import agent_adapters

    out = []
    for name, case in all_catalog_inputs():
        case = canonical(case)
        adapters = agent_adapters(
            rt, case["policy"], case["agent"], manifest=case["manifest"], role=case["role"]
        )
        catalog = rt.layout.build_tool_catalog(adapters) + rt.react_call.get_react_tools_catalog(
            subagent_role=case["role"]
        )
        text = rt.layout.build_compact_tools_block(catalog, header="X")
        out.append({"id": name, "input": case, "runtime": read_compact(text)})
    return out


def predict(case: dict[str, Any]) -> Any:
    from policy.domain.manifest import parse_manifest
    from policy.domain.resolution import resolve_consumer

    resolution = resolve_consumer(
        case["policy"], case["agent"], parse_manifest(case["manifest"]), role=case["role"]
    )
    tools = [
        {"id": tool.tool_id, "namespaces": list(tool.namespaces_applicable)}
        for tool in resolution.listing
    ]
    return {"header": "X [COMPACT]" if tools else "", "tools": tools, "trait_lines": False}
