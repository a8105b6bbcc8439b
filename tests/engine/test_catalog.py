from __future__ import annotations

from typing import Any

import pytest

from core.vocabulary import EARLY_PROFILE
from engine.catalog.catalog import render_catalog, render_scope, render_value

DELEGATE = {"strategy": ["neutral"], "execution": dict(EARLY_PROFILE)}

# DESIGN §2.7, byte for byte.
DELEGATE_SCOPE = (
    "   Scope:\n"
    "       \u2022 strategy: neutral\n"
    "       \u2022 execution: trigger=tool_call_complete, concurrency=parallel_with_generation, "
    "result_dependency=detached, replay=at_most_once_per_round\n"
)


def test_it_renders_the_design_example_byte_for_byte() -> None:
    rendered = render_scope(DELEGATE)
    assert rendered == DELEGATE_SCOPE
    assert rendered.encode("utf-8").count(b"\xe2\x80\xa2 ") == 2


def test_it_renders_no_scope_block_without_traits() -> None:
    assert render_scope({}) == ""
    assert render_scope({}, {}) == ""


def test_it_renders_normalized_traits_in_mapping_order() -> None:
    traits = {
        "execution": {key: value.upper() for key, value in EARLY_PROFILE.items()},
        "strategy": [" Neutral ", "bogus", "neutral"],
    }
    assert render_scope(traits).splitlines()[1:] == [
        "       \u2022 execution: trigger=tool_call_complete, "
        "concurrency=parallel_with_generation, "
        "result_dependency=detached, replay=at_most_once_per_round",
        "       \u2022 strategy: neutral",
    ]


def test_it_renders_an_invalid_strategy_as_unknown() -> None:
    assert render_scope({"strategy": []}) == "   Scope:\n       \u2022 strategy: unknown\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (["exploration", "exploitation"], "exploration, exploitation"),
        # The runtime drops every part that prints empty: "", None, 0, False, blanks.
        ({"a": "1", "": "x", "b": None, "c": "", "d": 0, "e": False, "f": True}, "a=1, f=True"),
        (["x", "", None, 0, "  ", 3], "x, 3"),
        ([], ""),
        ("plain", "plain"),
        (30, "30"),
        (True, "True"),
    ],
)
def test_it_renders_lists_mappings_and_scalars_like_the_runtime(value: Any, text: str) -> None:
    assert render_value(value) == text


def test_it_keeps_other_trait_keys_as_is() -> None:
    rendered = render_scope({"strategy": "exploration", "audience": ["Ops", "Admins"]})
    assert rendered.endswith("       \u2022 audience: Ops, Admins\n")


def test_it_renders_namespace_overrides_after_the_default_strategy() -> None:
    rendered = render_scope(
        {"strategy": ["exploration"]},
        {"task": {"strategy": ["Exploitation"]}, "docs": {"note": "no strategy here"}},
    )
    assert rendered == (
        "   Scope:\n"
        "       \u2022 strategy: exploration (default)\n"
        "       \u2022 strategy overrides by namespace:\n"
        "           - task: exploitation\n"
    )


def test_it_renders_the_overrides_block_when_the_default_has_no_strategy() -> None:
    rendered = render_scope({}, {"task": {"strategy": ["neutral", "exploration"]}}, ("task",))
    assert rendered == (
        "   Scope:\n"
        "       \u2022 namespaces applicable: task\n"
        "       \u2022 strategy overrides by namespace:\n"
        "           - task: neutral, exploration\n"
    )


def test_it_renders_a_numbered_catalog_with_a_blank_line_per_tool() -> None:
    catalog = render_catalog(
        [
            ("react.delegate", DELEGATE, None),
            ("workspace_jobs.export_report", None, None),
            # An empty override is no override (the runtime drops it).
            ("named_services.search_objects", {"strategy": "exploration"}, {"task": {}}, ["task"]),
        ]
    )
    assert catalog == (
        "[1] react.delegate\n"
        + DELEGATE_SCOPE
        + "\n"
        + "[2] workspace_jobs.export_report\n"
        + "\n"
        + "[3] named_services.search_objects\n"
        + "   Scope:\n"
        + "       \u2022 namespaces applicable: task\n"
        + "       \u2022 strategy: exploration\n"
        + "\n"
    )


def test_it_gives_no_line_to_an_override_without_strategy_but_keeps_the_header() -> None:
    # Measured on the runtime: the header is written even when no namespace line follows.
    rendered = render_scope({"strategy": ["exploration"]}, {"docs": {"note": "x"}}, ("docs",))
    assert rendered.splitlines() == [
        "   Scope:",
        "       \u2022 namespaces applicable: docs",
        "       \u2022 strategy: exploration (default)",
        "       \u2022 strategy overrides by namespace:",
    ]


def test_it_gives_a_named_service_tool_a_scope_block_even_without_traits() -> None:
    assert render_scope({}, {}, ("task", "mem")) == (
        "   Scope:\n       \u2022 namespaces applicable: task, mem\n"
    )


def test_it_skips_a_trait_whose_value_prints_empty() -> None:
    assert render_scope({"strategy": "neutral", "owner": "", "tags": []}) == (
        "   Scope:\n       \u2022 strategy: neutral\n"
    )


# --- the compact form (issue 37 §2) -------------------------------------------------------------

COMPACT_POLICY: dict[str, Any] = {
    "surfaces": {
        "as_consumer": {
            "agents": {
                "main": {
                    "tools": [
                        {
                            "kind": "python",
                            "alias": "jobs",
                            "module": "pkg.jobs",
                            "allowed": ["search"],
                            "tool_traits": {"search": {"strategy": "exploration"}},
                        },
                        {"kind": "mcp", "alias": "web", "server_id": "web", "allowed": ["open"]},
                        {
                            "kind": "named_service",
                            "alias": "named_services",
                            "namespaces": {"task": {"allowed": ["object.search"]}},
                        },
                    ]
                }
            }
        }
    }
}


def _preview(data: dict[str, Any], detail: str | None = None) -> Any:
    from engine.catalog.catalog import catalog_preview
    from engine.tools.resolution import resolve_consumer

    return catalog_preview(data, "main", resolve_consumer(data, "main").listing, detail=detail)


def test_the_compact_form_has_ids_async_marks_and_namespaces_but_no_scope() -> None:
    preview = _preview(COMPACT_POLICY, "compact")
    lines = preview.text.split("\n")
    assert lines[0] == "[AVAILABLE TOOLS] [COMPACT]"
    assert lines[1].startswith(
        "This catalog: 13 tools - jobs.search, named_services.search_objects"
    )
    assert lines[3:7] == [
        "- jobs.search",
        "- named_services.search_objects [async]",
        "  namespaces: task",
        "- mcp.web.open [async]",
    ]
    assert "Scope:" not in preview.text
    assert "exploration" not in preview.text
    assert not preview.text.endswith("\n")
    assert preview.document().endswith("- react.delegate\n")


def test_the_default_form_and_its_source_come_from_the_react_blocks() -> None:
    data = {
        **COMPACT_POLICY,
        "react": {"main": {"instructions": {"tool_catalog_detail": "compact"}}},
    }
    preview = _preview(data)
    assert (preview.detail, preview.default_detail) == ("compact", "compact")
    assert preview.default_source == "react.main.instructions.tool_catalog_detail"
    assert preview.include is True
    # Asking for the other form renders it and still says which applies by default.
    full = _preview(data, "full")
    assert (full.detail, full.default_detail) == ("full", "compact")
    assert "   Scope:\n" in full.text


def test_a_catalog_switched_off_is_said_with_its_source() -> None:
    data = {
        **COMPACT_POLICY,
        "react": {"agents": {"main": {"instructions": {"include_tool_catalog": False}}}},
    }
    preview = _preview(data)
    assert preview.include is False
    assert preview.include_source == "react.agents.main.instructions.include_tool_catalog"
    assert preview.as_json()["include_tool_catalog"] is False
