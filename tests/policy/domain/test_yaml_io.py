"""Loading, building and dumping policy YAML (policy.domain.yaml_io): line numbers, duplicate
keys, limits and a lossless round trip.

Over 500 lines on purpose: as its module, the loader, builder and dumper are tested against the
same source positions."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import pytest
import yaml

from engine.document.diagnostics import Severity
from policy.domain.yaml_io import (
    CLI_MAX_BYTES,
    EMPTY_POLICY,
    HEADER_FORMAT_LINE,
    MAX_DEPTH,
    MAX_NODES,
    WEB_MAX_BYTES,
    agent_export_text,
    body_hash,
    dump_body,
    empty_policy,
    export_text,
    load_policy,
    split_header,
)

POLICY_PREFIX = "surfaces:\n  as_consumer:\n    agents: {}\n"


def only(text: str | bytes, **limits: int) -> tuple[str, int | None, int | None, str]:
    """The single diagnostic of refused text as (code, line, column, message)."""
    loaded = load_policy(text, **limits)
    assert loaded.refused
    assert loaded.data is None
    assert len(loaded.diagnostics) == 1, loaded.diagnostics
    d = loaded.diagnostics[0]
    assert d.severity is Severity.ERROR
    return d.code, d.line, d.column, d.message


def test_it_exposes_the_limits_the_spec_names() -> None:
    assert (WEB_MAX_BYTES, CLI_MAX_BYTES, MAX_NODES) == (1024**2, 64 * 1024**2, 100_000)
    assert HEADER_FORMAT_LINE == "# traitdeck-format: 1\n"


# --- repeated keys ---------------------------------------------------------------------------


def test_it_refuses_a_repeated_key_with_its_line() -> None:
    text = POLICY_PREFIX + "    model: a\n    model: b\n"
    code, line, column, message = only(text)
    assert (code, line, column) == ("duplicate-key", 5, 5)
    assert "`model`" in message
    assert "line 4" in message
    assert load_policy(text).diagnostics[0].path == "model"


def test_it_reports_every_repeated_key_not_just_the_first() -> None:
    text = "a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\na: 4\n"
    loaded = load_policy(text)
    assert loaded.refused
    found = [(d.code, d.line, d.column, d.path) for d in loaded.diagnostics]
    assert found == [("duplicate-key", 5, 3, "b.c"), ("duplicate-key", 6, 1, "a")]


def test_it_treats_keys_that_load_equal_as_repeated() -> None:
    code, line, column, message = only("1: a\ntrue: b\n")
    assert (code, line, column) == ("duplicate-key", 2, 1)
    assert "`true`" in message
    assert "`1`" in message


def test_it_keeps_a_number_key_and_a_quoted_key_apart() -> None:
    loaded = load_policy(POLICY_PREFIX + "    x:\n      1: a\n      '1': b\n")
    assert not loaded.refused
    assert loaded.data["surfaces"]["as_consumer"]["x"] == {1: "a", "1": "b"}


def test_it_reports_a_repeated_key_inside_an_anchor_once() -> None:
    loaded = load_policy("a: &x {k: 1, k: 2}\nb: *x\nc: *x\n")
    assert [(d.code, d.line, d.column) for d in loaded.diagnostics] == [("duplicate-key", 1, 14)]


# --- size, encoding ----------------------------------------------------------------------------


def test_it_refuses_text_over_the_size_limit_in_utf8_bytes() -> None:
    # 600 characters but 1200 bytes: the limit is on bytes.
    text = POLICY_PREFIX + "    note: " + "é" * 600 + "\n"
    assert only(text, max_bytes=1000)[0] == "yaml-too-large"
    assert only(text.encode(), max_bytes=1000)[0] == "yaml-too-large"
    assert not load_policy(text, max_bytes=len(text.encode())).refused


def test_it_refuses_over_one_mebibyte_by_default_but_not_at_the_cli_limit() -> None:
    text = POLICY_PREFIX + "    note: '" + "x" * WEB_MAX_BYTES + "'\n"
    code, line, _, message = only(text)
    assert (code, line) == ("yaml-too-large", None)
    assert str(WEB_MAX_BYTES) in message
    assert not load_policy(text, max_bytes=CLI_MAX_BYTES).refused


def test_it_refuses_bytes_that_are_not_utf8_with_their_position() -> None:
    code, line, column, message = only(b"surfaces:\n  x: caf\xe9\n")
    assert (code, line, column, message) == ("yaml-syntax", 2, 9, "the file is not UTF-8 text")


def test_it_refuses_text_with_lone_surrogates_as_not_utf8() -> None:
    assert only("a: '\ud800'\n")[:3] == ("yaml-syntax", 1, 5)


def test_it_reads_utf8_bytes_and_ignores_a_byte_order_mark() -> None:
    text = POLICY_PREFIX + "    note: ünïcode ✓\n"
    for raw in (text.encode(), b"\xef\xbb\xbf" + text.encode(), "\ufeff" + text):
        loaded = load_policy(raw)
        assert loaded.diagnostics == []
        assert loaded.data["surfaces"]["as_consumer"]["note"] == "ünïcode ✓"
        assert loaded.source.values[("surfaces", "as_consumer", "note")] == (4, 11)


# --- syntax ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("surfaces:\n\tas_consumer: {}\n", 2, 1, "tab"),
        ("a: 1\n---\nb: 2\n", 2, 1, "single document"),
        ("a: 1\n...\n---\nb: 2\n", 3, 1, "single document"),
        ("a: [1, 2\n", 2, 1, "expected ',' or ']', but got the end of the text"),
        ("a: b: c\n", 1, 5, "mapping values are not allowed"),
        ("a: *nowhere\n", 1, 4, "undefined alias"),
        ("a: 'unclosed\n", 2, 1, "unexpected end of stream"),
        ("a:\n  - 1\n  b: 2\n", 3, 3, "end of the indented block, but found a mapping key"),
        ("a: 1\x07\n", 1, 5, "U+0007"),
    ],
)
def test_it_refuses_a_syntax_error_with_line_and_column(
    text: str, line: int, column: int, words: str
) -> None:
    code, got_line, got_column, message = only(text)
    assert (code, got_line, got_column) == ("yaml-syntax", line, column)
    assert words in message
    assert load_policy(text).diagnostics[0].hint


def test_it_hints_at_spaces_for_tabs() -> None:
    assert "spaces" in load_policy("a:\n\tb: 1\n").diagnostics[0].hint


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("? [a, b]\n: 1\n", 1, 3, "list is used as a mapping key"),
        ("? {a: 1}\n: 1\n", 1, 3, "mapping is used as a mapping key"),
        ("x:\n  [a]: 1\n", 2, 3, "list is used as a mapping key"),
        ("a: 2024-13-45\n", 1, 4, "month must be in 1..12"),
        ("a: !custom 1\n", 1, 4, "`!custom` is not supported"),
        ("a: !!python/object:os.system ls\n", 1, 4, "not supported"),
        ("a: !!set {x}\n", 1, 4, "`!!set` is not supported"),
        ("a: =\n", 1, 4, "`!!value`"),
        ("a: {<<: [1]}\n", 1, 9, "merge key `<<` takes a mapping"),
    ],
)
def test_it_refuses_what_safe_load_cannot_build_with_its_position(
    text: str, line: int, column: int, words: str
) -> None:
    code, got_line, got_column, message = only(text)
    assert (code, got_line, got_column) == ("yaml-syntax", line, column)
    assert words in message


# --- aliases and merges -----------------------------------------------------------------------


def test_it_expands_anchors_into_equal_separate_copies() -> None:
    text = "defaults: &d {strategy: [exploration]}\n" + POLICY_PREFIX.replace(
        "{}", "{a: *d, b: *d}"
    )
    loaded = load_policy(text)
    assert loaded.diagnostics == []
    agents = loaded.data["surfaces"]["as_consumer"]["agents"]
    assert agents == {"a": {"strategy": ["exploration"]}, "b": {"strategy": ["exploration"]}}
    agents["a"]["strategy"].append("neutral")
    assert agents["b"]["strategy"] == ["exploration"]


@pytest.mark.parametrize(
    "text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a {<<: *a}\n", "a: &a [{b: [*a]}]\n"]
)
def test_it_refuses_a_recursive_alias(text: str) -> None:
    code, line, column, message = only(text)
    assert (code, line, column) == ("yaml-syntax", 1, 4)
    assert message.startswith("recursive alias")
    assert "`&a`" in message


def billion_laughs(levels: int) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_it_refuses_a_billion_laughs_without_expanding_it() -> None:
    code, _, _, message = only(billion_laughs(10))  # 9**10 strings once expanded: never built
    assert code == "yaml-too-large"
    assert message == f"aliases expand to more than {MAX_NODES} nodes beyond the text itself"


def test_it_expands_a_few_laughs_under_the_node_limit() -> None:
    loaded = load_policy(billion_laughs(4) + POLICY_PREFIX)  # 9**4 strings: under the limit
    assert loaded.diagnostics == []
    assert loaded.data["l3"][8][8][8] == ["lol"] * 9
    assert only(billion_laughs(4) + POLICY_PREFIX, max_nodes=6_000)[0] == "yaml-too-large"


def test_it_counts_the_nodes_aliases_add_at_the_exact_limit() -> None:
    # The text holds root, a, [1, 2] (3 nodes) and b: 6 nodes; *x adds a copy of 3.
    text = "a: &x [1, 2]\nb: *x\n"
    assert only(text, max_nodes=3)[0] == "shape"
    assert only(text, max_nodes=2)[0] == "yaml-too-large"


def test_a_large_text_without_aliases_is_not_refused_by_the_node_limit() -> None:
    agents = {f"agent{i}": {"tools": [{"kind": "mcp", "server_id": f"s{i}"}]} for i in range(50)}
    text = export_text({"surfaces": {"as_consumer": {"agents": agents}}})
    loaded = load_policy(text, max_nodes=10)
    assert not loaded.refused
    assert len(loaded.data["surfaces"]["as_consumer"]["agents"]) == 50


def test_it_refuses_nesting_deeper_than_its_limit() -> None:
    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert only(deepest)[0] == "shape"  # read, but not a policy
    code, line, column, _ = only("[" + deepest + "]")
    assert (code, line, column) == ("yaml-too-large", 1, MAX_DEPTH + 1)
    assert only("[" * 50_000)[0] == "yaml-too-large"


def test_it_exports_and_reads_back_a_policy_nested_to_the_limit() -> None:
    value: Any = "leaf"
    for _ in range(MAX_DEPTH - 5):  # the root, surfaces, as_consumer, agents, a hold 5 levels
        value = [value]
    policy = {"surfaces": {"as_consumer": {"agents": {"a": value}}}}
    loaded = load_policy(export_text(policy))
    assert (loaded.diagnostics, loaded.data) == ([], policy)
    deeper = {"surfaces": {"as_consumer": {"agents": {"a": [value]}}}}
    assert only(export_text(deeper))[0] == "yaml-too-large"


def test_it_refuses_aliases_that_nest_deeper_than_the_limit() -> None:
    chain = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, MAX_DEPTH + 5)]
    code, line, _, _ = only("\n".join(chain) + "\n")
    assert code == "yaml-too-large"
    assert line is not None


MERGES = """\
base: &base {strategy: [neutral], timeout_s: 5}
extra: &extra {timeout_s: 9, retry: safe}
surfaces:
  as_consumer:
    agents:
      main:
        one: {<<: *base, timeout_s: 20}
        two: {label: x, <<: [*extra, *base]}
        three:
          <<: *base
          strategy: [exploration]
"""


def test_it_merges_keys_like_safe_load() -> None:
    loaded = load_policy(MERGES)
    assert loaded.diagnostics == []
    assert loaded.data == yaml.safe_load(MERGES)
    main = loaded.data["surfaces"]["as_consumer"]["agents"]["main"]
    assert list(main["two"]) == list(
        yaml.safe_load(MERGES)["surfaces"]["as_consumer"]["agents"]["main"]["two"]
    )
    assert main["one"] == {"strategy": ["neutral"], "timeout_s": 20}
    assert main["two"] == {"timeout_s": 9, "retry": "safe", "strategy": ["neutral"], "label": "x"}
    assert "<<" not in main["three"]


def test_it_points_merged_keys_at_their_anchor() -> None:
    source = load_policy(MERGES).source
    main = ("surfaces", "as_consumer", "agents", "main")
    assert source.keys[(*main, "three", "strategy")] == (11, 11)
    assert source.keys[(*main, "three", "timeout_s")] == (1, 35)
    assert source.values[(*main, "three")] == (10, 11)


def test_it_reads_scalars_like_safe_load() -> None:
    text = POLICY_PREFIX + (
        "    values: [1, 0x1f, 1_000, 2.5, .inf, ~, null, true, 'yes', 2002-12-14,"
        " 2001-12-14t21:59:43.10-05:00, '', !!str 12, !!binary aGk=]\n    =: equals\n"
    )
    loaded = load_policy(text)
    assert loaded.diagnostics == []
    assert loaded.data == yaml.safe_load(text)
    values = loaded.data["surfaces"]["as_consumer"]["values"]
    assert values[9] == datetime.date(2002, 12, 14)
    assert values[13] == b"hi"


# --- shape -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "line", "column", "words"),
    [
        ("", "", None, None, "empty"),
        ("# nothing here\n", "", None, None, "empty"),
        ("~\n", "", 1, 1, "not empty"),
        ("- a\n- b\n", "", 1, 1, "not a list"),
        ("just text\n", "", 1, 1, "not text"),
        ("name: x\nother: y\n", "surfaces", 1, 1, "`surfaces` is missing"),
        ("surfaces: [a]\n", "surfaces", 1, 11, "`surfaces` must be a mapping"),
        ("surfaces:\n  as_provider: {}\n", "surfaces.as_consumer", 2, 3, "missing"),
        ("surfaces: {}\n", "surfaces.as_consumer", 1, 11, "`surfaces.as_consumer` is missing"),
        ("surfaces:\n  as_consumer: 3\n", "surfaces.as_consumer", 2, 16, "not a number"),
        ("surfaces:\n  as_consumer:\n    model: m\n", "agents", 3, 5, "agents` is missing"),
        ("surfaces:\n  as_consumer:\n    agents: []\n", "agents", 3, 13, "not a list"),
        ("surfaces:\n  as_consumer:\n    agents: main\n", "agents", 3, 13, "not text"),
    ],
)
def test_it_refuses_text_without_surfaces_as_consumer_agents(
    text: str, path: str, line: int | None, column: int | None, words: str
) -> None:
    loaded = load_policy(text)
    assert loaded.refused
    assert loaded.data is None
    [diagnostic] = loaded.diagnostics
    assert (diagnostic.code, diagnostic.path) == ("shape", path)
    assert (diagnostic.line, diagnostic.column) == (line, column)
    assert words in diagnostic.message
    assert diagnostic.hint == "start from `surfaces: {as_consumer: {agents: {}}}`"


# --- positions ---------------------------------------------------------------------------------

POSITIONS = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - name: jobs
            tool_traits:
              search:
                strategy: [exploration, neutral]
          - {kind: mcp, allowed: [open_page]}
"""


def test_it_records_positions_of_nested_keys_and_list_items() -> None:
    source = load_policy(POSITIONS).source
    tools = ("surfaces", "as_consumer", "agents", "main", "tools")
    strategy = (*tools, 0, "tool_traits", "search", "strategy")
    assert source.values[(*strategy, 0)] == (9, 28)
    assert source.values[(*strategy, 1)] == (9, 41)
    assert source.keys[strategy] == (9, 17)
    assert source.values[strategy] == (9, 27)
    assert source.values[(*tools, 0)] == (6, 13)
    assert (*tools, 0) not in source.keys
    assert source.keys[tools] == (5, 9)
    assert source.values[(*tools, 1, "allowed", 0)] == (10, 35)
    assert source.keys[(*tools, 1, "kind")] == (10, 14)
    assert source.values[()] == (1, 1)


# --- export and header -------------------------------------------------------------------------


def test_it_exports_the_exact_header_over_the_body_hash() -> None:
    policy = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    text = export_text(policy)
    body = "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools: []\n"
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert text == f"# traitdeck-format: 1\n# sha256: {digest}\n{body}"
    assert body_hash(body) == digest
    assert split_header(text) == (digest, body)
    loaded = load_policy(text)
    assert (loaded.header_hash, loaded.diagnostics, loaded.data) == (digest, [], policy)


def test_it_notes_as_info_when_an_export_was_edited_by_hand() -> None:
    """An info, not a warning (DESIGN §2.9): a hand edit is nothing to fix."""
    text = export_text(empty_policy()).replace("agents: {}", "agents: {main: {}}")
    loaded = load_policy(text)
    assert not loaded.refused
    assert loaded.data["surfaces"]["as_consumer"]["agents"] == {"main": {}}
    [warning] = loaded.diagnostics
    assert (warning.severity, warning.code, warning.line, warning.column) == (
        Severity.INFO,
        "hash-mismatch",
        2,
        1,
    )
    assert "edited" in warning.message
    assert "export" in warning.hint


def test_it_warns_about_a_header_whose_hash_is_malformed() -> None:
    text = HEADER_FORMAT_LINE + "# sha256: XYZ\n" + POLICY_PREFIX
    loaded = load_policy(text)
    assert (loaded.refused, loaded.header_hash) == (False, None)
    assert [(d.code, d.line) for d in loaded.diagnostics] == [("hash-mismatch", 2)]


def test_it_warns_about_a_format_version_it_does_not_know() -> None:
    loaded = load_policy("# traitdeck-format: 2\n# sha256: abc\n" + POLICY_PREFIX)
    assert not loaded.refused
    [warning] = loaded.diagnostics
    assert (warning.severity, warning.code, warning.line) == (Severity.WARNING, "format-version", 1)
    assert "2" in warning.message
    assert "format 1" in warning.message


def test_it_reads_hand_written_text_without_a_header() -> None:
    loaded = load_policy("# my policy\n" + POLICY_PREFIX)
    assert (loaded.header_hash, loaded.diagnostics) == (None, [])
    assert split_header("# my policy\n") == (None, "# my policy\n")


def test_it_keeps_unknown_keys_and_exports_them_in_source_order() -> None:
    text = """\
version: 3  # comments are not kept
surfaces:
  ui: {theme: dark}
  as_consumer:
    model: gpt
    agents:
      main:
        zeta: 1
        alpha: {discovery: auto, mcp: [x]}
    default_agent: main
  announce: true
"""
    loaded = load_policy(text)
    assert loaded.diagnostics == []
    expected_body = """\
version: 3
surfaces:
  ui:
    theme: dark
  as_consumer:
    model: gpt
    agents:
      main:
        zeta: 1
        alpha:
          discovery: auto
          mcp:
            - x
    default_agent: main
  announce: true
"""
    assert dump_body(loaded.data) == expected_body
    assert split_header(export_text(loaded.data))[1] == expected_body


def test_it_exports_the_empty_policy_and_reads_it_back() -> None:
    text = export_text(empty_policy())
    assert text.endswith("\nsurfaces:\n  as_consumer:\n    agents: {}\n")
    loaded = load_policy(text)
    assert (loaded.diagnostics, loaded.data) == ([], EMPTY_POLICY)


def test_it_hands_out_a_fresh_empty_policy_each_time() -> None:
    first = empty_policy()
    first["surfaces"]["as_consumer"]["agents"]["main"] = {}
    assert empty_policy() == {"surfaces": {"as_consumer": {"agents": {}}}}
    assert EMPTY_POLICY == {"surfaces": {"as_consumer": {"agents": {}}}}


def test_it_exports_the_same_bytes_every_time() -> None:
    loaded = load_policy(MERGES)
    assert export_text(loaded.data) == export_text(load_policy(MERGES).data)
    assert export_text(load_policy(export_text(loaded.data)).data) == export_text(loaded.data)


@pytest.mark.parametrize(
    "value",
    [
        "123",
        "1.5",
        "true",
        "no",
        "null",
        "~",
        "",
        " leading and trailing ",
        "2024-01-02",
        "a: b",
        "# not a comment",
        "- not a list",
        "*not_an_alias",
        "<<",
        "=",
        "line one\nline two\n",
        "ends without newline\nsecond",
        "\nstarts with a newline",
        "trailing spaces  \nhere",
        "many\n\n\nnewlines\n\n",
        "tab\tand\rreturn\x85nel\u2028ls",
        "ünïcode ✓ 漢字 🙂",
        "x" * 500 + " " + "y" * 500,
        0,
        -17,
        10**18 - 1,  # the largest a document may hold (core.numbers)
        1.5,
        -0.0,
        1e300,
        float("inf"),
        True,
        None,
        datetime.date(2024, 2, 29),
        datetime.datetime(2024, 2, 29, 12, 30, 5, 250000),  # noqa: DTZ001
        datetime.datetime(
            2024, 2, 29, 12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        ),
        b"\x00\xff",
        [],
        {},
        [[], {}, [[]]],
        {"": {"nested": {}}},
    ],
)
def test_it_dumps_values_that_load_back_equal(value: Any) -> None:
    policy = {"surfaces": {"as_consumer": {"agents": {"main": {"v": value, value_key(value): 1}}}}}
    body = dump_body(policy)
    assert body.endswith("\n")
    loaded = load_policy(body)
    assert loaded.diagnostics == []
    assert loaded.data == policy
    assert dump_body(loaded.data) == body


def value_key(value: Any) -> Any:
    return f"key {value!r}" if isinstance(value, list | dict) else value


def test_it_writes_multi_line_text_as_a_literal_block() -> None:
    assert dump_body({"d": "line one\nline two\n"}) == "d: |\n  line one\n  line two\n"


def test_it_never_folds_long_text() -> None:
    long = " ".join(["word"] * 400)
    assert dump_body({"d": long}) == f"d: {long}\n"


def test_it_writes_shared_objects_out_in_full() -> None:
    shared = {"strategy": ["neutral"]}
    body = dump_body({"a": shared, "b": shared})
    assert "&" not in body
    assert "*" not in body


# --- per-agent export --------------------------------------------------------------------------


def test_it_exports_one_agent_with_the_other_as_consumer_keys_in_order() -> None:
    text = """\
top: kept out
surfaces:
  as_provider: {x: 1}
  as_consumer:
    model: m
    agents:
      main: {tools: []}
      other: {tools: [{kind: mcp}]}
    default_agent: main
"""
    data = load_policy(text).data
    exported = agent_export_text(data, "other")
    body = """\
surfaces:
  as_consumer:
    model: m
    agents:
      other:
        tools:
          - kind: mcp
    default_agent: main
"""
    assert exported == f"# traitdeck-format: 1\n# sha256: {body_hash(body)}\n{body}"
    assert list(data["surfaces"]["as_consumer"]["agents"]) == ["main", "other"]


def test_it_raises_key_error_for_an_agent_that_does_not_exist() -> None:
    with pytest.raises(KeyError, match="ghost"):
        agent_export_text(empty_policy(), "ghost")
