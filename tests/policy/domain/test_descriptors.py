"""Reading KDCube bundle descriptors as KDCube's file-backed store does, and the owned subtree."""

from __future__ import annotations

import textwrap

import pytest

from policy.domain.descriptors import (
    DescriptorError,
    changed_outside_owned,
    descriptor_items,
    owned_path,
    read_policy_text,
    with_owned,
)
from policy.domain.yaml_io import load_document

AGENTS = "surfaces: {as_consumer: {agents: {main: {tools: []}}}}"


def _descriptor(body: str) -> str:
    return textwrap.dedent(body).lstrip()


TWO = _descriptor(
    f"""
    bundles:
      version: "1"
      items:
        - id: "site@1"
          config:
            ui: {{}}
        - id: "agent@1"
          config:
            # the policy
            {AGENTS}
        - id: "other@1"
          config:
            tools: {{agents: {{default_agent: []}}}}
    """
)


def test_it_reads_the_only_bundle_carrying_a_policy_without_being_asked() -> None:
    text = _descriptor(
        f"""
        bundles:
          version: "1"
          items:
            - id: site@1
              config: {{ui: {{}}}}
            - id: agent@1
              config:
                {AGENTS}
        """
    )
    read = read_policy_text(text)
    assert read.bundle is not None
    assert read.bundle.bundle_id == "agent@1"
    assert not read.loaded.refused
    assert read.loaded.data["surfaces"]["as_consumer"]["agents"] == {"main": {"tools": []}}


def test_it_refuses_to_guess_between_two_bundles_with_a_policy() -> None:
    with pytest.raises(DescriptorError) as caught:
        read_policy_text(TWO)
    assert caught.value.kind == "ambiguous"
    assert caught.value.exit_code == 2
    assert caught.value.policy_ids == ("agent@1", "other@1")


def test_it_names_the_bundles_with_a_policy_for_an_unknown_bundle() -> None:
    with pytest.raises(DescriptorError) as caught:
        read_policy_text(TWO, bundle="site@1")
    assert caught.value.exit_code == 1
    assert "agent@1, other@1" in str(caught.value)


def test_it_says_no_bundle_carries_a_policy() -> None:
    text = 'bundles: {version: "1", items: [{id: a, config: {surfaces: {as_provider: {}}}}]}'
    with pytest.raises(DescriptorError) as caught:
        read_policy_text(text)
    assert caught.value.kind == "none"
    assert caught.value.exit_code == 2


def test_it_reads_a_top_level_items_list_as_the_file_store_does_not() -> None:
    with pytest.raises(DescriptorError) as caught:
        read_policy_text(f"items: [{{id: a, config: {{{AGENTS}}}}}]")
    assert "bundles.items" in str(caught.value)


def test_it_merges_legacy_props_shallowly_on_top_of_config() -> None:
    text = _descriptor(
        """
        bundles:
          items:
            - id: a
              config:
                surfaces: {as_consumer: {agents: {main: {tools: []}}}}
                ui: {x: 1}
              props:
                surfaces: {as_consumer: {agents: {helper: {tools: []}}}}
        """
    )
    read = read_policy_text(text)
    assert list(read.loaded.data["surfaces"]["as_consumer"]["agents"]) == ["helper"]
    assert read.loaded.data["ui"] == {"x": 1}
    assert read.bundle is not None
    assert read.bundle.item_path(("surfaces",))[3] == "props"


def test_it_skips_items_kdcube_skips_and_keeps_earlier_props_for_an_empty_repeat() -> None:
    text = _descriptor(
        f"""
        bundles:
          items:
            - just text
            - config: {{{AGENTS}}}
            - id: a
              git_url: x
              config: {{{AGENTS}}}
            - id: " b "
              config: {{{AGENTS}}}
            - id: b
        """
    )
    items = descriptor_items(load_document(text).data)
    assert [(item.bundle_id, item.index) for item in items] == [("b", 3)]


def test_it_points_diagnostics_into_the_descriptor() -> None:
    text = _descriptor(
        """
        bundles:
          items:
            - id: a
              config:
                surfaces:
                  as_consumer:
                    agents:
                      main:
                        tools:
                          - {kind: python, alias: t, ref: t.py, allowed: [x],
                             tool_traits: {x: {strategy: [bogus]}}}
        """
    )
    read = read_policy_text(text)
    assert read.loaded.source.at_key(("surfaces", "as_consumer", "agents", "main")) == (8, 15)


def test_it_keeps_env_and_file_references_as_text() -> None:
    text = f'bundles: {{items: [{{id: a, config: {{key: "env:SECRET", {AGENTS}}}}}]}}'
    read = read_policy_text(text)
    assert read.loaded.data["key"] == "env:SECRET"


def test_it_reads_bundle_props_as_before_and_refuses_a_bundle_option_for_them() -> None:
    assert read_policy_text(AGENTS).bundle is None
    with pytest.raises(DescriptorError):
        read_policy_text(AGENTS, bundle="a")


def test_it_accepts_the_legacy_tools_agents_shape() -> None:
    read = read_policy_text("tools: {agents: {default_agent: []}}")
    assert not read.loaded.refused


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"surfaces": {"as_consumer": {}}}, ("surfaces", "as_consumer")),
        ({"tools": {"agents": {}}}, ("tools", "agents")),
        ({"surfaces": {"as_provider": {}}, "tools": {"agents": {}}}, ("tools", "agents")),
        ({}, ("surfaces", "as_consumer")),
    ],
)
def test_it_finds_the_owned_subtree(props: dict[str, object], expected: tuple[str, ...]) -> None:
    assert owned_path(props) == expected


def test_it_writes_the_owned_subtree_and_nothing_else() -> None:
    props = {"surfaces": {"as_provider": {"a": 1}}, "ui": {}}
    draft = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    merged = with_owned(props, draft)
    assert merged == {
        "surfaces": {"as_provider": {"a": 1}, "as_consumer": {"agents": {"main": {"tools": []}}}},
        "ui": {},
    }
    assert changed_outside_owned(props, merged) == []


def test_it_names_the_keys_a_draft_changed_outside_the_owned_subtree() -> None:
    base = {"surfaces": {"as_consumer": {"agents": {}}}, "react": {"main": {"x": 1}}}
    draft = {"surfaces": {"as_consumer": {"agents": {"a": {}}}}, "react": {"main": {"x": 2}}}
    assert changed_outside_owned(base, draft) == ["react.main.x"]
