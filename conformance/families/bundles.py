"""KDCube's own example bundle descriptors (``examples/bundles/*/config/bundles.template.yaml``):
what the runtime's file-backed descriptor store reads from each, and for every bundle carrying a
policy and every agent of it (plus one id it does not name) the model-facing tools in order, their
traits, early eligibility and Scope blocks — against Traitdeck reading the same descriptor text.

The descriptors are stored beside the fixture (``fixtures/bundles/``) with the runtime commit and
KDCube's MIT licence notice, so the comparison runs without the runtime present. A few small
descriptors written here cover the odd shapes the store handles its own way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from conformance import fixtures

NAME = "bundles"
MIN_CASES = 10
EXAMPLES = "kdcube_ai_app/apps/chat/sdk/examples/bundles"
INPUTS = fixtures.FIXTURES / NAME
#: An agent id no example names: the runtime falls back to a default agent.
UNNAMED_AGENT = "not-named-agent"
ROLE = "parent"

_AGENTS = json.dumps({"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}})
#: Odd descriptors: (name, text). Each is read by the store and by Traitdeck.
ODD: tuple[tuple[str, str], ...] = (
    (
        "odd-items",
        "bundles:\n  items:\n    - just text\n    - {config: " + _AGENTS + "}\n"
        "    - {id: g, git_url: x, config: " + _AGENTS + "}\n"
        "    - {id: ' b ', config: " + _AGENTS + "}\n"
        "    - {id: b}\n    - {id: '', config: " + _AGENTS + "}\n",
    ),
    (
        "config-and-props",
        "bundles:\n  items:\n    - id: a\n      config:\n        ui: {x: 1}\n"
        "        surfaces: {as_consumer: {agents: {main: {tools: []}}}}\n"
        "      props:\n        surfaces: {as_consumer: {agents: {helper: {tools: []}}}}\n",
    ),
    ("props-only", "bundles:\n  items:\n    - id: a\n      props: " + _AGENTS + "\n"),
    (
        "repeated-id-later-props",
        "bundles:\n  items:\n    - {id: a, config: " + _AGENTS + "}\n"
        "    - {id: a, config: {tools: {agents: {default_agent: []}}}}\n",
    ),
    ("top-level-items", "items:\n  - {id: a, config: " + _AGENTS + "}\n"),
    ("bundles-not-mapping", "bundles: [1, 2]\n"),
    ("items-not-list", "bundles: {items: {id: a}}\n"),
    (
        "legacy-shape",
        "bundles:\n  items:\n    - id: a\n      config:\n        tools:\n"
        "          agents:\n            default_agent:\n              - {kind: python, alias: t, "
        "ref: t.py, allowed: [a], tool_traits: {a: {strategy: [exploration]}}}\n",
    ),
)


def _owned(props: Any) -> dict[str, Any]:
    """What the runtime's tool config reads from stored props: both places an agent map lives."""

    def get(*keys: str) -> Any:
        node = props
        for key in keys:
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        return node

    return {
        "as_consumer_agents": get("surfaces", "as_consumer", "agents"),
        "legacy_agents": get("tools", "agents"),
    }


def _agent_ids(props: Any) -> list[str]:
    owned = _owned(props)
    ids = [str(k) for k in owned["as_consumer_agents"] or {}]
    ids += [str(k) for k in owned["legacy_agents"] or {} if str(k) not in ids]
    return [*ids, UNNAMED_AGENT]


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# ----- the runtime's side ------------------------------------------------------------------
def _store_props(rt: Any, text: str) -> dict[str, Any]:
    """bundle id → stored props, as KDCube's file-backed store reads the descriptor (examples
    enabled: the deployment setting that would hide the example bundles is not Traitdeck's)."""
    import importlib

    store_module = importlib.import_module("kdcube_ai_app.infra.plugin.bundle_store")
    store_module._examples_enabled = lambda: True
    cls = store_module._FileBundleDescriptorStore
    payload = yaml.safe_load(text) or {}
    loaded = cls._registry_from_payload(object.__new__(cls), payload)
    if loaded is None:
        return {}
    registry, props_map = loaded
    return {bid: props_map.get(bid) or {} for bid in registry.bundles}


def _runtime_agent(rt: Any, props: Mapping[str, Any], agent: str) -> list[dict[str, Any]]:
    from conformance.families.catalog import scope_blocks
    from conformance.runtime_policy import agent_adapters

    adapters = agent_adapters(rt, props, agent, manifest={}, role=ROLE)
    catalog = rt.layout.build_tool_catalog(adapters) + rt.react_call.get_react_tools_catalog(
        subagent_role=ROLE
    )
    scopes = scope_blocks(rt.layout.build_tools_block(catalog, header="X"))
    out = []
    for entry, scope in zip(catalog, scopes, strict=True):
        traits = dict(entry.get("tool_traits") or {})
        early = bool(
            rt.traits.strategy_values(traits) == {"neutral"}
            and rt.traits.executes_parallel_on_tool_call_complete(traits)
        )
        out.append(
            {"id": entry.get("id"), "traits": traits, "early": early, "scope": scope["scope"]}
        )
    return out


def _inputs(rt: Any) -> list[tuple[str, str]]:
    """(name, text) of every descriptor: the runtime's examples, stored as fixture inputs."""
    INPUTS.mkdir(parents=True, exist_ok=True)
    out = []
    for path in sorted((rt.src / EXAMPLES).glob("*/config/bundles.template.yaml")):
        name = f"{path.parent.parent.name}.yaml"
        text = path.read_text(encoding="utf-8")
        (INPUTS / name).write_text(text, encoding="utf-8")
        out.append((name, text))
    licence = (rt.src / "LICENSE").read_text(encoding="utf-8")
    (INPUTS / "LICENSE").write_text(licence, encoding="utf-8")
    (INPUTS / "README.md").write_text(
        "# KDCube's example bundle descriptors\n\n"
        f"Copied unchanged from `{fixtures.RUNTIME_REPO}` at commit `{rt.commit}`, path\n"
        f"`app/ai-app/src/kdcube-ai-app/{EXAMPLES}/<bundle>/config/bundles.template.yaml`\n"
        "(the file is named after the bundle directory), by `python -m conformance.record "
        "bundles`.\nThey are KDCube's, under its MIT licence: see `LICENSE` in this directory.\n",
        encoding="utf-8",
    )
    return out


def record(rt: Any) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    texts = [*_inputs(rt), *ODD]
    for name, text in texts:
        stored = _store_props(rt, text)
        source = {"file": name} if name.endswith(".yaml") else {"text": text}
        cases.append(
            {
                "id": f"loader-{name}",
                "input": {"kind": "loader", **source},
                "runtime": _canonical({bid: _owned(p) for bid, p in stored.items()}),
            }
        )
        for bundle_id, props in stored.items():
            owned = _owned(props)
            if owned["as_consumer_agents"] is None and owned["legacy_agents"] is None:
                continue
            for agent in _agent_ids(props):
                cases.append(
                    {
                        "id": f"agent-{name}-{bundle_id}-{agent}",
                        "input": {"kind": "agent", **source, "bundle": bundle_id, "agent": agent},
                        "runtime": _canonical(_runtime_agent(rt, props, agent)),
                    }
                )
    return cases


# ----- Traitdeck's side ----------------------------------------------------------------------
def descriptor_text(case: Mapping[str, Any]) -> str:
    """The descriptor a case reads (a stored example, or the case's own text)."""
    if "file" in case:
        return Path(INPUTS / case["file"]).read_text(encoding="utf-8")
    return str(case["text"])


def predict(case: dict[str, Any]) -> Any:
    from engine.catalog.catalog import scope_lines
    from engine.tools.resolution import resolve_consumer
    from policy.domain.descriptors import descriptor_items, read_policy_text
    from policy.domain.yaml_io import CLI_MAX_BYTES, load_document

    text = descriptor_text(case)
    if case["kind"] == "loader":
        data = load_document(text, max_bytes=CLI_MAX_BYTES).data
        return _canonical({i.bundle_id: _owned(i.props or {}) for i in descriptor_items(data)})
    read = read_policy_text(text, bundle=case["bundle"], max_bytes=CLI_MAX_BYTES)
    resolution = resolve_consumer(read.loaded.data, case["agent"], None, role=ROLE)
    return _canonical(
        [
            {
                "id": tool.tool_id,
                "traits": tool.normalized_traits,
                "early": tool.early,
                "scope": scope_lines(tool),
            }
            for tool in resolution.listing
        ]
    )
