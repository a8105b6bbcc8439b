"""Record KDCube's own admin props routes: ``KDCUBE_SRC=… python -m conformance.kdcube_props``.

``conformance.kdcube_admin`` serves KDCube's routes (its router wiring, its props store on a real
redis-server, the workspace example descriptor). This script sends them what Traitdeck sends
(through Traitdeck's own Django-free client and patch builder) and what an admin sends through
KDCube's widget, and keeps for every request: the request, KDCube's answer, the props stored in
Redis afterwards, whether the descriptor file kept its comment, every message published on the
props-update channel, and what the runtime's loader (``_deep_merge_props`` of defaults ← stored
props, then ``agent_tool_config_from_bundle_props``) yields for the agents involved.

The exchanges are grouped by scenario, in the order sent; ``tests/kdcube/kdcube_replay.py`` answers
Traitdeck from them in ``make test`` and refuses any request they do not hold.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx

from conformance import harness
from conformance.families import config as config_family
from conformance.kdcube_admin import BUNDLE_ID, PROJECT, TENANT, TOKENS, AdminServer

NAME = "kdcube-props"
NOTICE = (
    "Answers recorded from KDCube (github.com/kdcube/kdcube-ai-app, MIT License, "
    "Copyright (c) 2025 Elena Viter) serving its own admin props routes and the workspace "
    "example bundle's descriptor and code defaults."
)
PROPS = f"/admin/integrations/bundles/{BUNDLE_ID}/props"
AUTH = {
    "admin": TOKENS["admin"],
    "ops": TOKENS["ops"],
    "viewer": TOKENS["viewer"],
    "invalid": "not-a-token",
}
#: The secret reference the descriptor holds inside the owned subtree (what Traitdeck keeps).
KNOWLEDGE_KEY_PATH = ("mcp", "services", "mcpServers", "knowledge", "headers", "X-Api-Key")


class Recorder:
    def __init__(self, server: AdminServer) -> None:
        self.server = server
        self.cases: list[dict[str, Any]] = []
        self.scenario = ""
        self.defaults: dict[str, Any] = {}

    def loader(self, agents: tuple[str, ...]) -> dict[str, Any]:
        """What the runtime loads for ``agents`` from defaults ← the stored props."""
        from kdcube_ai_app.apps.chat.sdk.runtime.tool_config import (
            agent_tool_config_from_bundle_props,
        )

        merged = self.server.integrations._deep_merge_props(
            self.defaults, self.server.stored_props() or {}
        )
        out: dict[str, Any] = {}
        for agent in agents:
            cfg = agent_tool_config_from_bundle_props(merged, agent)
            out[agent] = {
                "allowed_tool_names_by_alias": cfg.allowed_tool_names_by_alias,
                "tool_traits": {
                    tool: {k: list(v) if isinstance(v, tuple) else v for k, v in t.items()}
                    if isinstance(t, dict)
                    else t
                    for tool, t in cfg.tool_traits.items()
                },
            }
        out["mcp_servers"] = self.mcp_servers(merged)
        return json.loads(json.dumps(out, default=str))

    @staticmethod
    def mcp_servers(merged: dict[str, Any]) -> dict[str, bool]:
        """Which configured MCP servers the runtime can open: the services config the workflow
        resolves (``BaseWorkflow._resolve_mcp_services_config``) read by ``MCPToolsSubsystem``."""
        from types import SimpleNamespace

        from kdcube_ai_app.apps.chat.sdk.runtime.mcp.mcp_tools_subsystem import MCPToolsSubsystem
        from kdcube_ai_app.apps.chat.sdk.solutions.chatbot.base_workflow import BaseWorkflow

        workflow = SimpleNamespace(bundle_props=merged, get_prop_path=BaseWorkflow.get_prop_path)
        services = BaseWorkflow._resolve_mcp_services_config(workflow)  # type: ignore[arg-type]
        subsystem = MCPToolsSubsystem(
            bundle_id=BUNDLE_ID,
            mcp_tool_specs=[{"server_id": "knowledge", "alias": "knowledge"}],
            adapter_factory=lambda server: None,
            cache=None,
            services_config=services,
        )
        return {"knowledge": subsystem._server_spec("knowledge") is not None}

    def send(
        self,
        case_id: str,
        method: str,
        *,
        path: str = PROPS,
        auth: str = "admin",
        body: dict[str, Any] | None = None,
        agents: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        query = {"tenant": TENANT, "project": PROJECT} if method == "GET" else {}
        headers = {"Authorization": f"Bearer {AUTH[auth]}"} if auth in AUTH else {}
        with self.server.published() as published:
            response = httpx.request(
                method,
                self.server.url + path,
                params=query,
                json=body,
                headers=headers,
                timeout=120,
            )
        answer = response.json()
        case: dict[str, Any] = {
            "id": case_id,
            "scenario": self.scenario,
            "request": {"method": method, "path": path, "query": query, "auth": auth, "json": body},
            "response": {"status": response.status_code, "json": answer},
            "stored": self.server.stored_props() if method == "POST" else None,
            "descriptor_comment_kept": self.server.descriptor_text().startswith("# kept by hand"),
            "published": published,
        }
        if agents:
            case["loader"] = self.loader(agents)
        self.cases.append(case)
        return dict(answer)


def traitdeck_version(effective: dict[str, Any]) -> dict[str, Any]:
    """The version Traitdeck pushes: the workspace bundle's consumer surface as an operator
    imported it from the descriptor (the secret stays a reference), with the rendering tools
    removed, one trait changed and the knowledge server narrowed to one tool."""
    subtree = copy.deepcopy(effective)
    node = subtree
    for key in KNOWLEDGE_KEY_PATH[:-1]:
        node = node[key]
    node[KNOWLEDGE_KEY_PATH[-1]] = "env:TD_REC_KNOWLEDGE_KEY"
    tools = subtree["agents"]["main"]["tools"]
    subtree["agents"]["main"]["tools"] = [t for t in tools if t.get("name") != "rendering"]
    for tool in subtree["agents"]["main"]["tools"]:
        if tool.get("name") == "web":
            tool["tool_traits"]["web_fetch"] = {"strategy": ["exploration", "exploitation"]}
        if tool.get("name") == "knowledge":
            # Traitdeck refuses traits on "*" of a server whose tools it does not know (an error
            # that blocks publishing): the operator names the one tool the agent may use.
            tool["allowed"] = ["search_docs"]
            tool["tool_traits"] = {"search_docs": {"strategy": ["exploration"]}}
    return {"surfaces": {"as_consumer": subtree}}


def record(server: AdminServer) -> list[dict[str, Any]]:
    from kdcube import client as kdcube_client
    from kdcube.domain import props as kdcube_props

    rec = Recorder(server)
    target = kdcube_client.Target(
        url=server.url, tenant=TENANT, project=PROJECT, bundle=BUNDLE_ID, token=TOKENS["admin"]
    )

    rec.scenario = "refusals"
    rec.send("get-without-token", "GET", auth="none")
    rec.send("get-invalid-token", "GET", auth="invalid")
    rec.send("get-not-super-admin", "GET", auth="viewer")
    rec.send("post-not-super-admin", "POST", auth="viewer", body={"op": "merge", "props": {}})
    rec.send("get-unknown-bundle", "GET", path="/admin/integrations/bundles/nope@1/props")
    rec.send(
        "post-bundle-not-in-descriptor",
        "POST",
        path="/admin/integrations/bundles/nope@1/props",
        body={"tenant": TENANT, "project": PROJECT, "op": "merge", "props": {"x": 1}},
    )

    # Traitdeck's push: read, build the merge patch, write, read back and compare.
    rec.scenario = "push"
    # "helper" is not in the props yet: what the loader gives an agent that is absent.
    first = rec.send("push-read", "GET", agents=("main", "helper"))
    rec.defaults = first["defaults"]
    before = kdcube_props.Target(props=first["props"], defaults=first["defaults"])
    version = traitdeck_version(before.effective)
    patch = kdcube_props.push_patch(before, version)
    body = {"tenant": TENANT, "project": PROJECT, "op": "merge", "props": patch}
    rec.send("push-write", "POST", body=body, agents=("main",))
    after = rec.send("push-read-back", "GET")
    back = kdcube_props.Target(props=after["props"], defaults=after["defaults"])
    rec.cases[-1]["traitdeck"] = {
        "version": version,
        "differs_after_push": kdcube_props.differs(back, version),
        "differs_before_push": kdcube_props.differs(before, version),
    }
    assert kdcube_client.props_read(target)["props"] == after["props"]
    # What the runtime then gives the model: the loader and tool subsystem over defaults ← props.
    rt = harness.load(server.src)
    merged = server.integrations._deep_merge_props(first["defaults"], server.stored_props())
    rec.cases[-1]["model_facing"] = config_family.runtime_tools(
        rt, {"policy": merged, "agent": "main", "manifest": {}, "role": "parent"}
    )

    # An admin changes one trait through KDCube's API (the widget's merge); Traitdeck reads it.
    rec.scenario = "outside-change"
    outside = copy.deepcopy(after["props"]["surfaces"]["as_consumer"]["agents"]["main"]["tools"])
    for tool in outside:
        if tool.get("name") == "web":
            tool["tool_traits"]["web_search"] = {"strategy": ["exploitation"]}
    rec.send(
        "admin-changes-a-trait",
        "POST",
        auth="ops",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {"surfaces": {"as_consumer": {"agents": {"main": {"tools": outside}}}}},
        },
        agents=("main",),
    )
    changed = rec.send("drift-read", "GET")
    rec.cases[-1]["traitdeck"] = {
        "differs": kdcube_props.differs(
            kdcube_props.Target(props=changed["props"], defaults=changed["defaults"]), version
        )
    }

    # The removal experiments: what each way of expressing a removal leaves in the props and
    # what the runtime's loader yields from defaults ← props.
    rec.scenario = "removals"
    helper = [
        {
            "name": "web",
            "kind": "python",
            "module": "kdcube_ai_app.apps.chat.sdk.tools.web_tools",
            "alias": "web_tools",
            "allowed": ["web_search"],
        },
    ]
    rec.send(
        "merge-adds-agent",
        "POST",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {"surfaces": {"as_consumer": {"agents": {"helper": {"tools": helper}}}}},
        },
        agents=("main", "helper"),
    )
    rec.send(
        "merge-leaving-out-an-agent-keeps-it",
        "POST",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {"surfaces": {"as_consumer": {"agents": {"main": {"tools": outside}}}}},
        },
        agents=("main", "helper"),
    )
    rec.send(
        "merge-agent-null",
        "POST",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {"surfaces": {"as_consumer": {"agents": {"helper": None}}}},
        },
        agents=("main", "helper"),
    )
    rec.send(
        "merge-list-without-a-tool",
        "POST",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {
                "surfaces": {
                    "as_consumer": {
                        "agents": {
                            "main": {"tools": [t for t in outside if t.get("name") != "gmail"]}
                        }
                    }
                }
            },
        },
        agents=("main",),
    )
    rec.send(
        "merge-server-null",
        "POST",
        body={
            "tenant": TENANT,
            "project": PROJECT,
            "op": "merge",
            "props": {
                "surfaces": {
                    "as_consumer": {"mcp": {"services": {"mcpServers": {"knowledge": None}}}}
                }
            },
        },
        agents=("main",),
    )
    # The trap of a read-modify-write replace: what GET returned (secrets resolved) is stored.
    current = rec.send("replace-read", "GET")
    rec.send(
        "replace-with-what-get-returned",
        "POST",
        body={"tenant": TENANT, "project": PROJECT, "op": "replace", "props": current["props"]},
        agents=("main",),
    )

    # KDCube's own editor (the admin widget, @kdcube/components-react agentic-config:
    # api.ts writeAgentSection → writeAppProps, op: merge) next to Traitdeck's push. Traitdeck
    # pushes the version again over whatever the experiments above left, then an admin saves
    # main's "Tools & traits" from an editor opened before that push (the whole tools list as
    # it was then: merge replaces lists), and flips the "Multi-action" switch, which writes
    # multi_action_mode into the agent's react block (react.agents.main).
    rec.scenario = "widget"
    current = rec.send("widget-push-read", "GET")
    now = kdcube_props.Target(props=current["props"], defaults=current["defaults"])
    body = {
        "tenant": TENANT,
        "project": PROJECT,
        "op": "merge",
        "props": kdcube_props.push_patch(now, version),
    }
    rec.send("widget-push-write", "POST", body=body, agents=("main",))
    back = rec.send("widget-push-read-back", "GET")
    rec.cases[-1]["traitdeck"] = {
        "differs_after_push": kdcube_props.differs(
            kdcube_props.Target(props=back["props"], defaults=back["defaults"]), version
        )
    }
    stale = copy.deepcopy(first["props"]["surfaces"]["as_consumer"]["agents"]["main"]["tools"])
    rec.send(
        "widget-saves-stale-tools",
        "POST",
        auth="ops",
        body=widget_write({"surfaces": {"as_consumer": {"agents": {"main": {"tools": stale}}}}}),
        agents=("main",),
    )
    stale_read = rec.send("widget-stale-read", "GET")
    # "Push version N again" (overwrite): the patch against what the widget left.
    undone = kdcube_props.Target(props=stale_read["props"], defaults=stale_read["defaults"])
    body = {
        "tenant": TENANT,
        "project": PROJECT,
        "op": "merge",
        "props": kdcube_props.push_patch(undone, version),
    }
    rec.send("widget-push-again-write", "POST", body=body, agents=("main",))
    again = rec.send("widget-push-again-read-back", "GET")
    rec.cases[-1]["traitdeck"] = {
        "differs_after_push": kdcube_props.differs(
            kdcube_props.Target(props=again["props"], defaults=again["defaults"]), version
        )
    }
    rec.send(
        "widget-multi-action-switch",
        "POST",
        auth="ops",
        body=widget_write({"react": {"agents": {"main": {"multi_action_mode": "on"}}}}),
        agents=("main",),
    )
    rec.send("widget-multi-action-read", "GET")
    return rec.cases


def widget_write(props: dict[str, Any]) -> dict[str, Any]:
    """The body KDCube's admin widget posts (``writeAppProps``)."""
    return {"tenant": TENANT, "project": PROJECT, "op": "merge", "props": props}


def _record_from(src: Path) -> list[dict[str, Any]]:
    with AdminServer(src) as server:
        return record(server)


def main() -> int:
    return harness.record_family(NAME, NOTICE, _record_from)


if __name__ == "__main__":
    raise SystemExit(main())
