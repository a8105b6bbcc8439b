"""``traitdeck manifest``: python tool modules introspected as the runtime does, run as a real
process with no Django settings."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.policy.test_cli import traitdeck

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {kind: python, alias: jobs, module: jobs_tools}
          - {kind: python, alias: listed, ref: tools/listed.py}
          - {kind: mcp, server_id: files}
"""

JOBS = '''\
from os.path import join  # imported: the runtime's reflection lists it too


def tool_trait(**traits):
    def deco(fn):
        fn.__kdcube_tool_traits__ = traits
        return fn
    return deco


@tool_trait(strategy=["exploration"])
def search(query: str, limit: int = 10):
    """Search jobs."""


def _private():
    pass
'''

LISTED = """\
def _fetch(url):
    return url


def list_tools():
    return {"fetch": {"callable": _fetch, "description": "Fetch a URL",
                      "tool_traits": {"strategy": ["exploitation"], "replay": "x"}}}
"""


def setup(tmp_path: Path, policy: str = POLICY) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "jobs_tools.py").write_text(JOBS)
    (tmp_path / "bundle" / "tools").mkdir(parents=True)
    (tmp_path / "bundle" / "tools" / "listed.py").write_text(LISTED)
    file = tmp_path / "policy.yaml"
    file.write_text(policy)
    return file


def test_it_prints_the_manifest_of_every_python_connection(tmp_path: Path) -> None:
    file = setup(tmp_path)
    result = traitdeck(
        "manifest", file, "--agent", "main",
        "--python-path", tmp_path / "pkg", "--bundle-root", tmp_path / "bundle",
    )  # fmt: skip
    assert result.code == 0, result.err
    data = result.json()
    assert sorted(data) == ["jobs.join", "jobs.search", "jobs.tool_trait", "listed.fetch"]
    assert data["jobs.search"]["tool_traits"] == {"strategy": ["exploration"]}
    assert data["jobs.search"]["description"] == "Search jobs."
    assert [p["name"] for p in data["jobs.search"]["params"]] == ["query", "limit"]
    assert data["listed.fetch"]["tool_traits"] == {"strategy": ["exploitation"], "replay": "x"}
    assert "tool_traits" not in data["jobs.join"]


def test_its_output_is_a_manifest_the_other_commands_read(tmp_path: Path) -> None:
    file = setup(tmp_path)
    made = traitdeck(
        "manifest", file, "--agent", "main",
        "--python-path", tmp_path / "pkg", "--bundle-root", tmp_path / "bundle",
    )  # fmt: skip
    manifest = tmp_path / "m.json"
    manifest.write_text(made.out)
    effective = traitdeck(
        "effective", file, "--agent", "main", "--manifest", manifest, "--format", "json"
    )
    tools = effective.json()["tools"]
    assert tools["jobs.search"]["traits"]["strategy"] == ["exploration"]
    assert "manifest" in tools["jobs.search"]["provenance"]["strategy"]


def test_it_names_the_connections_that_fail_and_exits_1(tmp_path: Path) -> None:
    file = setup(tmp_path, POLICY.replace("module: jobs_tools", "module: no_such_module_xyz"))
    result = traitdeck("manifest", file, "--agent", "main", "--bundle-root", tmp_path / "bundle")
    assert result.code == 1
    assert (
        "main tools[0] (jobs): ModuleNotFoundError: No module named 'no_such_module_xyz'"
        in result.err
    )
    assert sorted(json.loads(result.out)) == ["listed.fetch"]
    relative = traitdeck("manifest", file, "--agent", "main")
    assert "give --bundle-root" in relative.err


def test_it_exits_1_for_an_unknown_agent(tmp_path: Path) -> None:
    file = setup(tmp_path, textwrap.dedent(POLICY))
    assert traitdeck("manifest", file, "--agent", "nobody").code == 1
