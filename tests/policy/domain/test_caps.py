"""The web's size caps in the domain: what a policy counts, and which change goes over."""

from __future__ import annotations

from typing import Any

from policy.domain.analysis import analyze_text
from policy.domain.caps import Cap, over_caps, policy_size, refuse_over_caps

SAMPLE_SHAPE = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {name: jobs, kind: python, ref: jobs.py, allowed: [search, export, launch],
             tool_traits: {search: {strategy: [exploration]}},
             tool_execution: {report: {timeout_s: 5}}}
          - {kind: mcp, server_id: browser, allowed: [open_page, click]}
          - kind: named_service
            namespaces:
              task: {allowed: [provider.about, object.search]}
              mem: {operations: [object.search]}
      helper:
        tools: []
"""


def policy(agents: int, connections: int = 0, tools: int = 0) -> dict[str, Any]:
    listed = [f"t{i}" for i in range(tools)]
    agent = {
        "tools": [{"name": f"c{i}", "kind": "python", "ref": "x.py"} for i in range(connections)]
    }
    if connections and tools:
        agent["tools"][0]["allowed"] = listed
    return {"surfaces": {"as_consumer": {"agents": {f"a{i}": agent for i in range(agents)}}}}


def test_it_counts_agents_connections_and_distinct_tool_names_per_connection() -> None:
    data = analyze_text(SAMPLE_SHAPE).data
    size = policy_size(data)
    # jobs: search, export, launch, report; browser: open_page, click; named service:
    # task's two operations and mem's one.
    assert (size.agents, size.connections, size.tools) == (2, 3, 9)


def test_it_reads_any_document_without_failing() -> None:
    for data in (
        None,
        [],
        "x",
        {"surfaces": 5},
        {"surfaces": {"as_consumer": {"agents": {"a": 1}}}},
    ):
        assert policy_size(data).connections == 0


def test_a_policy_over_a_cap_gets_one_error_naming_the_cap_and_its_setting() -> None:
    caps = [Cap("tools", 2, "TRAITDECK_MAX_TOOLS"), Cap("agents", 5, "TRAITDECK_MAX_AGENTS")]
    [diagnostic] = over_caps(policy(1, connections=1, tools=3), caps)
    assert diagnostic.code == "policy-too-large"
    assert diagnostic.severity == "error"
    assert "3 tools" in diagnostic.message
    assert "at most 2 (TRAITDECK_MAX_TOOLS)" in diagnostic.message


def test_a_change_that_shrinks_a_policy_already_over_a_cap_is_not_refused() -> None:
    caps = [Cap("agents", 1, "TRAITDECK_MAX_AGENTS")]
    assert over_caps(policy(2), caps, before=policy(3)) == []
    assert over_caps(policy(3), caps, before=policy(3)) == []
    assert over_caps(policy(4), caps, before=policy(3))


def test_no_caps_no_refusal() -> None:
    assert over_caps(policy(10_000), []) == []


def test_an_analysis_over_a_cap_is_refused_with_its_diagnostics_kept() -> None:
    analysis = analyze_text(SAMPLE_SHAPE)
    refused = refuse_over_caps(analysis, [Cap("connections", 2, "TRAITDECK_MAX_CONNECTIONS")])
    assert refused.refused
    assert refused.data is None
    assert "policy-too-large" in [d.code for d in refused.diagnostics]
    assert len(refused.diagnostics) == len(analysis.diagnostics) + 1
    assert refuse_over_caps(analysis, [Cap("connections", 3, "X")]) is analysis
