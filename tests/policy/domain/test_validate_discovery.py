"""Diagnostics made from what discovery listed on an MCP server (docs/discovery.md)."""

from __future__ import annotations

from typing import Any

from engine.document.diagnostics import Diagnostic, Severity
from engine.tools.annotations import DEFAULT, EXPLICIT, UNTRUSTED, hints, suggest
from engine.tools.manifest import Manifest, parse_manifest
from policy.domain.validation.discovered import ServerFacts
from policy.domain.validation.validate import validate_policy
from policy.domain.yaml_io import load_policy
from tests.policy.domain.policy_text import EARLY_FLOW, doc, where

MIXED: dict[str, Any] = {
    "read_file": {"readOnlyHint": True},
    "list_dir": {"readOnlyHint": True},
    "delete_file": {"destructiveHint": True},
    "stat": None,
}


def manifest(
    tools: dict[str, Any], *, alias: str = "fs", pages: dict[str, int] | None = None
) -> Manifest:
    data = {}
    for name, sent in tools.items():
        entry: dict[str, Any] = {
            "description": name,
            "source": {"kind": "mcp", "server_id": "files", "page": (pages or {}).get(name, 1)},
        }
        if sent is not None:
            entry["annotations"] = sent
        data[f"mcp.{alias}.{name}"] = entry
    return parse_manifest(data)


def run(text: str, found: Any, servers: ServerFacts | None = None) -> list[Diagnostic]:
    loaded = load_policy(text)
    assert not loaded.refused
    return validate_policy(loaded.data, loaded.source, found, servers=servers)


def codes(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


WILDCARD_POLICY = doc(
    """
    - kind: mcp
      server_id: files
      alias: fs
      allowed: ['*']
      tool_traits:
        '*': {strategy: [exploration]}
    """
)


def test_it_warns_when_one_wildcard_covers_reads_and_writes() -> None:
    found = codes(run(WILDCARD_POLICY, manifest(MIXED)), "mcp-wildcard-mixed")
    assert len(found) == 1
    warning = found[0]
    assert warning.severity is Severity.WARNING
    assert "read-only: list_dir, read_file" in warning.message
    assert "destructive: delete_file, stat" in warning.message
    assert "delete_file: {strategy: [exploitation]}" in warning.hint
    assert (warning.line, warning.column) == where(WILDCARD_POLICY, "'*': {")


def test_it_stays_quiet_when_every_tool_behaves_alike() -> None:
    alike = {"read_file": {"readOnlyHint": True}, "list_dir": {"readOnlyHint": True}}
    assert codes(run(WILDCARD_POLICY, manifest(alike)), "mcp-wildcard-mixed") == []


def test_it_ignores_a_hand_written_manifest_without_provenance() -> None:
    hand = parse_manifest({"mcp.fs.read_file": {}, "mcp.fs.delete_file": {}})
    assert codes(run(WILDCARD_POLICY, hand), "mcp-wildcard-mixed") == []


def test_it_warns_about_an_allowed_name_the_server_does_not_list() -> None:
    text = doc(
        """
        - kind: mcp
          server_id: files
          alias: fs
          allowed: [read_file, raed_dir]
          tool_traits:
            read_file: {strategy: [exploration]}
        """
    )
    found = codes(run(text, manifest(MIXED)), "mcp-allowed-missing")
    assert [d.path for d in found] == ["agents.main.tools[0].allowed[1]"]
    assert "'raed_dir'" in found[0].message
    assert "Traitdeck's credentials" in found[0].message


def test_it_warns_about_tools_past_the_first_page() -> None:
    paged = manifest(MIXED, pages={"delete_file": 2, "stat": 3})
    found = codes(run(WILDCARD_POLICY, paged), "mcp-beyond-first-page")
    assert len(found) == 1
    assert "delete_file, stat" in found[0].message
    assert "one page" in found[0].message


def test_it_reports_contradictions_only_for_trusted_servers() -> None:
    text = doc(
        f"""
        - kind: mcp
          server_id: files
          alias: fs
          allowed: [delete_file, read_file]
          tool_traits:
            delete_file: {{strategy: [exploration]}}
            read_file: {{strategy: [neutral], execution: {EARLY_FLOW}}}
        """
    )
    found = manifest({"delete_file": {"destructiveHint": True}, "read_file": {}})
    untrusted = run(text, found, ServerFacts())
    assert codes(untrusted, "trait-contradicts-annotation") == []
    trusted = codes(
        run(text, found, ServerFacts(trusted=frozenset({"files"}))), "trait-contradicts-annotation"
    )
    assert len(trusted) == 2
    assert "mcp.fs.delete_file has strategy exploration" in trusted[0].message
    assert "destructiveHint true (explicit)" in trusted[0].message
    assert "neither read-only nor idempotent" in trusted[1].message
    assert "readOnlyHint false (default)" in trusted[1].message


def test_it_notes_a_discovered_tool_with_no_traits() -> None:
    text = doc(
        """
        - kind: mcp
          server_id: files
          alias: fs
          tool_traits:
            read_file: {strategy: [exploration]}
        """
    )
    found = codes(run(text, manifest(MIXED)), "tool-untraited")
    assert [d.severity for d in found] == [Severity.INFO] * 3
    assert {d.message.split()[0] for d in found} == {
        "mcp.fs.list_dir",
        "mcp.fs.delete_file",
        "mcp.fs.stat",
    }


def test_it_says_a_server_is_unconfigured_only_where_discovery_is_possible() -> None:
    assert codes(run(WILDCARD_POLICY, None), "mcp-server-unconfigured") == []  # the CLI
    web = codes(run(WILDCARD_POLICY, None, ServerFacts()), "mcp-server-unconfigured")
    assert len(web) == 1
    assert web[0].severity is Severity.INFO
    sourced = ServerFacts(sourced=frozenset({"files"}))
    assert codes(run(WILDCARD_POLICY, None, sourced), "mcp-server-unconfigured") == []
    configured = WILDCARD_POLICY.replace(
        "surfaces:\n  as_consumer:\n",
        "surfaces:\n  as_consumer:\n    mcp:\n      services:\n        files: {command: x}\n",
    )
    assert codes(run(configured, None, ServerFacts()), "mcp-server-unconfigured") == []


def test_it_marks_each_hint_explicit_or_default() -> None:
    found = hints({"readOnlyHint": True, "destructiveHint": None})
    assert (found["readOnlyHint"].value, found["readOnlyHint"].mark) == (True, EXPLICIT)
    assert (found["destructiveHint"].value, found["destructiveHint"].mark) == (True, DEFAULT)
    assert (found["openWorldHint"].value, found["openWorldHint"].mark) == (True, DEFAULT)


def test_it_suggests_from_annotations_and_says_what_it_rests_on() -> None:
    read = suggest("mcp.fs.read_file", {"readOnlyHint": True}, trusted=True)
    assert (read.strategy, read.marks) == ("exploration", (EXPLICIT,))
    unknown = suggest("mcp.fs.stat", None, trusted=False)
    assert (unknown.strategy, unknown.marks) == ("exploitation", (DEFAULT, UNTRUSTED))
    assert unknown.only_defaults
    assert suggest("w", {"idempotentHint": True}, trusted=True).idempotent.value is True


def test_it_finds_kdcube_own_named_services_server_mixed_under_one_wildcard() -> None:
    """The listing KDCube's ``named_services`` MCP server really sends (recorded by the
    ``discovery`` conformance family from the runtime's example bundle): reads and writes."""
    import json
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[2] / "conformance" / "fixtures" / "discovery.json"
    case = next(c for c in json.loads(fixture.read_text())["cases"] if c["id"] == "named_services")
    sent = {tool["name"]: tool.get("annotations") for tool in case["input"]["tools"]}
    text = WILDCARD_POLICY.replace("alias: fs", "alias: ns")
    found = codes(run(text, manifest(sent, alias="ns")), "mcp-wildcard-mixed")
    assert len(found) == 1
    assert "named_services_upsert" in found[0].message
    assert "named_services_search" in found[0].message
    # The writes come first in the hint: they are what the '*' gets wrong.
    assert "named_services_upsert: {strategy: [exploitation]}" in found[0].hint
    assert "named_services_search" not in found[0].hint
