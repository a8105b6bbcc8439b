from __future__ import annotations

from engine.tools.manifest import parse_manifest
from policy.domain.analysis import analyze_text

TWO_AGENTS = """\
surfaces:
  as_consumer:
    agents:
      a:
        tools:
          - {kind: python, ref: tools/jobs.py, alias: jobs, allowed: [search]}
      b:
        tools:
          - {kind: python, ref: tools/jobs.py, alias: jobs, allowed: [search]}
"""
MANIFEST = parse_manifest({"jobs.search": {"tool_traits": {"strategy": ["exploration"]}}})


def unknown_strategy_agents(analysis_paths: list[str]) -> set[str]:
    return {path.split(".")[1] for path in analysis_paths}


def test_a_per_agent_manifest_applies_only_to_its_agent() -> None:
    analysis = analyze_text(TWO_AGENTS, manifests={"a": MANIFEST})
    flagged = [d.path for d in analysis.diagnostics if d.code == "strategy-unknown"]
    assert unknown_strategy_agents(flagged) == {"b"}


def test_a_global_manifest_applies_to_every_agent() -> None:
    analysis = analyze_text(TWO_AGENTS, manifest=MANIFEST)
    assert not [d for d in analysis.diagnostics if d.code == "strategy-unknown"]


def test_refused_text_is_not_validated_further() -> None:
    analysis = analyze_text("surfaces: [")
    assert analysis.refused
    assert [d.code for d in analysis.diagnostics] == ["yaml-syntax"]
    assert analysis.report()["summary"] == {"errors": 1, "warnings": 0, "info": 0}
