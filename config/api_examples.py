"""A real example for every request body of the API, set into the OpenAPI schema so that the
docs page (``/api/docs``) offers a body that works when tried, not ``"string"``.

Each example is one the sample policy (``make demo``) accepts; ``tests/hardening`` sends each
of them to the running API and checks none is refused for its shape.
"""

from __future__ import annotations

from typing import Any, Final

#: A small, complete policy (what validate and import read: YAML text).
POLICY_YAML: Final = """\
surfaces:
  as_consumer:
    default_agent: main
    agents:
      main:
        tools:
          - id: browser
            kind: mcp
            server_id: browser
            alias: browser
            allowed: [open_page, close]
            tool_traits:
              open_page:
                strategy: [exploration]
              close:
                strategy: [neutral]
            tool_execution:
              open_page: {timeout_s: 10, mode: sync, retry: natural_key}
              close: {timeout_s: 2, mode: sync, retry: natural_key}
"""

#: (method, path) → the example body. YAML bodies are text; the rest JSON.
EXAMPLES: Final[dict[tuple[str, str], Any]] = {
    ("post", "/api/v1/policy/validate"): POLICY_YAML,
    ("post", "/api/v1/policy/import"): POLICY_YAML,
    ("post", "/api/v1/policy/export-into"): POLICY_YAML,
    ("post", "/api/v1/agents/{agent}/dry-run"): {
        "turn_id": "turn-1",
        "iteration": 0,
        "max_actions": 2,
        "attempts": [
            [
                {"action": "call_tool", "tool_id": "mcp.browser.open_page", "params": {}},
                {"action": "call_tool", "tool_id": "mcp.browser.close", "params": {}},
            ]
        ],
    },
    ("post", "/api/v1/agents"): {"name": "support"},
    ("patch", "/api/v1/agents/{agent}"): {"name": "support"},
    ("post", "/api/v1/agents/{agent}/connections"): {
        "id": "search",
        "kind": "mcp",
        "server_id": "search",
        "alias": "search",
        "allowed": ["query"],
    },
    ("patch", "/api/v1/agents/{agent}/connections/{index}"): {"allowed": ["open_page", "close"]},
    ("post", "/api/v1/agents/{agent}/connections/{index}/move"): {"to": 0},
    ("put", "/api/v1/agents/{agent}/connections/{index}/tools/{key}"): {
        "strategy": ["exploration"],
        "early": False,
        "design": {"timeout_s": 10, "mode": "sync", "retry": "natural_key"},
    },
    ("put", "/api/v1/agents/{agent}/manifest"): {
        "mcp.browser.open_page": {"tool_traits": {"strategy": ["exploration"]}}
    },
    ("post", "/api/v1/events"): {
        "events": [
            {
                "event_id": "4a8f1f2e-7c1d-4b5e-9a57-1d2c3b4a5e6f",
                "ts": "2026-12-07T12:00:00.000Z",
                "agent": "main",
                "turn_id": "turn-1",
                "iteration": 0,
                "type": "tool.finished",
                "action_index": 0,
                "tool_id": "mcp.browser.open_page",
                "tool_call_id": "tc_1",
                "status": "ok",
                "duration_ms": 812.5,
            }
        ]
    },
    ("post", "/api/v1/policy/impact"): {
        "candidate": "draft",
        "baseline": "published",
        "limit": 100,
    },
    # The sample policy has warnings: without confirm_warnings the example answered 422.
    ("post", "/api/v1/versions"): {
        "message": "Raise open_page's time limit to 10 s",
        "confirm_warnings": True,
    },
    ("post", "/api/v1/versions/{number}/rollback"): {"message": "Back to the version before"},
    ("post", "/api/v1/bridge/status"): {
        "name": "kdcube-bridge",
        "last_envelope_ms": 1765108800000,
        "counts": {"forwarded": 120},
    },
    ("post", "/api/v1/kdcube/push"): {"overwrite": False},
    ("post", "/api/v1/kdcube/props-changed"): {"source": "listener", "updated_by": "ops"},
}


def declare_body_examples(schema: dict[str, Any]) -> None:
    """Set each request body's example (every content type it reads) in the schema."""
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body:
                continue
            example = EXAMPLES.get((method, path))
            if example is None:
                continue
            for content in body.get("content", {}).values():
                content["example"] = example
