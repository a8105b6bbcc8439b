"""Writing a policy into a KDCube bundles descriptor: only the policy's lines change."""

from __future__ import annotations

import copy
import difflib
from typing import Any

import pytest

from policy.domain.descriptor_write import ExportRefused, export_into_descriptor
from policy.domain.descriptors import DescriptorError, read_policy_text
from policy.domain.yaml_io import load_document

DESCRIPTOR = """\
# Deployment descriptor (kept under version control)
bundles:
  version: "1"
  items:
    - id: "site@1"    # the public site
      config:
        ui: {theme: 'dark'}

    - id: "agent@1"
      config:
        react:
          main: {instruction_profiles: {default: plain}}
        surfaces:
          as_provider: {x: 1}
          as_consumer:
            agents:
              main:
                tools:
                  # jobs: the background job runner
                  - kind: python
                    alias: jobs
                    ref: "tools/jobs.py"
                    allowed: [search, launch]   # two tools
                    tool_traits:
                      search: {strategy: [exploration]}   # reads only
                      launch:
                        strategy: [neutral]

                  - {kind: mcp, server_id: docs, alias: docs, allowed: ['*'],
                     tool_traits: {'*': {strategy: [exploration]}}}
"""


def _policy(text: str = DESCRIPTOR, bundle: str | None = None) -> dict[str, Any]:
    read = read_policy_text(text, bundle=bundle)
    assert not read.loaded.refused, read.loaded.diagnostics
    return copy.deepcopy(read.loaded.data)


def _connections(policy: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = policy["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
    return tools


def _changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_it_writes_an_unchanged_policy_back_byte_for_byte() -> None:
    assert export_into_descriptor(DESCRIPTOR, _policy()).text == DESCRIPTOR


def test_it_changes_one_line_for_one_trait_and_keeps_its_comment() -> None:
    policy = _policy()
    _connections(policy)[0]["tool_traits"]["search"]["strategy"] = ["neutral"]
    out = export_into_descriptor(DESCRIPTOR, policy).text
    assert _changed_lines(DESCRIPTOR, out) == [
        "-                      search: {strategy: [exploration]}   # reads only",
        "+                      search: {strategy: [neutral]}   # reads only",
    ]


def test_it_keeps_the_quotes_of_a_changed_value() -> None:
    policy = _policy()
    _connections(policy)[0]["ref"] = "tools/jobs2.py"
    out = export_into_descriptor(DESCRIPTOR, policy).text
    assert _changed_lines(DESCRIPTOR, out)[1].removeprefix("+").strip() == 'ref: "tools/jobs2.py"'


def test_it_adds_and_removes_keys_and_list_items_line_by_line() -> None:
    policy = _policy()
    jobs = _connections(policy)[0]
    del jobs["tool_traits"]["launch"]
    jobs["tool_execution"] = {"launch": {"timeout_s": 20}}
    _connections(policy).append({"kind": "python", "alias": "t", "ref": "t.py"})
    out = export_into_descriptor(DESCRIPTOR, policy).text
    assert _policy(out) == policy
    comments = [line for line in DESCRIPTOR.splitlines() if "#" in line]
    assert all(line in out.splitlines() for line in comments)
    assert (
        "- id: \"site@1\"    # the public site\n      config:\n        ui: {theme: 'dark'}\n\n"
        in (out)
    )


def test_it_refuses_a_draft_that_changed_keys_outside_the_owned_subtree() -> None:
    policy = _policy()
    policy["react"]["main"]["instruction_profiles"]["default"] = "fanout"
    with pytest.raises(ExportRefused) as caught:
        export_into_descriptor(DESCRIPTOR, policy)
    assert "react.main.instruction_profiles.default" in str(caught.value)
    assert caught.value.diagnostics[0].code == "outside-owned"


def test_a_draft_without_the_bundles_other_keys_writes_only_its_policy() -> None:
    policy = {"surfaces": {"as_consumer": _policy()["surfaces"]["as_consumer"]}}
    assert export_into_descriptor(DESCRIPTOR, policy).text == DESCRIPTOR


def test_it_creates_config_surfaces_as_consumer_in_a_bundle_without_one() -> None:
    policy = {"surfaces": {"as_consumer": _policy()["surfaces"]["as_consumer"]}}
    out = export_into_descriptor(DESCRIPTOR, policy, bundle="site@1").text
    site = load_document(out).data["bundles"]["items"][0]
    assert site["config"]["surfaces"]["as_consumer"] == policy["surfaces"]["as_consumer"]
    assert site["config"]["ui"] == {"theme": "dark"}
    assert all(line in out.splitlines() for line in DESCRIPTOR.splitlines())


def test_it_writes_into_legacy_props_when_they_hold_the_policy() -> None:
    text = (
        "bundles:\n  items:\n    - id: a\n      config: {ui: 1}\n      props:\n"
        "        surfaces: {as_consumer: {agents: {main: {tools: []}}}}\n"
    )
    policy = _policy(text)
    policy["surfaces"]["as_consumer"]["agents"]["helper"] = {"tools": []}
    written = export_into_descriptor(text, policy)
    assert written.location == ("props", "surfaces", "as_consumer")
    assert _policy(written.text) == policy


def test_it_writes_the_legacy_tools_agents_shape_where_it_is() -> None:
    text = "bundles:\n  items:\n    - id: a\n      config:\n        tools:\n          agents:\n"
    text += "            default_agent: []  # none yet\n"
    policy = _policy(text)
    policy["tools"]["agents"]["default_agent"] = [{"kind": "python", "alias": "t", "ref": "t"}]
    written = export_into_descriptor(text, policy)
    assert written.location == ("config", "tools", "agents")
    assert _policy(written.text) == policy


def test_it_asks_which_bundle_when_several_could_take_the_policy() -> None:
    text = "bundles: {items: [{id: a}, {id: b}]}\n"
    with pytest.raises(DescriptorError) as caught:
        export_into_descriptor(text, _policy())
    assert caught.value.exit_code == 2
    with pytest.raises(DescriptorError) as caught:
        export_into_descriptor(text, _policy(), bundle="c")
    assert caught.value.exit_code == 1
