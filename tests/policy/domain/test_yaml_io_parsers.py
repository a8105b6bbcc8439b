"""libyaml's C parser and PyYAML's pure-Python one read policy text alike: same data, positions and
diagnostics (words included), no crash on deep nesting, and not a byte of any export changes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.domain import yaml_io
from policy.domain.yaml_io import MAX_DEPTH, WEB_MAX_BYTES, LoadedPolicy, export_text, load_policy
from tests.policy.domain.test_yaml_io import MERGES, billion_laughs
from tests.policy.domain.test_yaml_properties import written_policies

ROOT = Path(__file__).resolve().parents[3]
needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")


class _NoFallback:
    """Stands in for the pure-Python loader: proves the C path read the text on its own."""

    def __init__(self, text: str) -> None:
        raise AssertionError("the text was read again in pure Python")


@contextlib.contextmanager
def loaders(*classes: type[Any]) -> Iterator[None]:
    # By hand, not with monkeypatch: hypothesis runs many examples in one test function.
    saved = yaml_io._LOADERS
    yaml_io._LOADERS = classes
    try:
        yield
    finally:
        yaml_io._LOADERS = saved


def pure_python(text: str | bytes, **limits: int) -> LoadedPolicy:
    with loaders(yaml_io._Loader):
        return load_policy(text, **limits)


def c_only(text: str | bytes, **limits: int) -> LoadedPolicy:
    with loaders(yaml_io._CLoader, _NoFallback):
        return load_policy(text, **limits)


def same(a: LoadedPolicy, b: LoadedPolicy) -> bool:
    # repr, not ==: it also compares key order, and NaN is NaN.
    return repr(a) == repr(b)


def fixture_policies() -> list[dict[str, Any]]:
    """Every policy the conformance fixtures hold (what the runtime was asked about)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            # A bundle's whole props (the control-plane recording) may have surfaces without
            # agents under as_consumer: those are not policies.
            consumer = (
                (node.get("surfaces") or {}) if isinstance(node.get("surfaces"), dict) else {}
            )
            if (
                isinstance(consumer.get("as_consumer"), dict)
                and "agents" in consumer["as_consumer"]
            ):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for file in sorted((ROOT / "tests" / "conformance" / "fixtures").glob("*.json")):
        if file.name == "roster.json":
            continue  # configs of every shape, ill-formed on purpose (what KDCube's widget lists)
        walk(json.loads(file.read_text(encoding="utf-8")))
    return found


SAMPLE = (ROOT / "policy" / "sample" / "sample-policy.yaml").read_text(encoding="utf-8")
POLICY = "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools:\n"
VALID = [
    SAMPLE,
    MERGES,
    billion_laughs(3) + "surfaces: {as_consumer: {agents: {}}}\n",
    POLICY + "          - {kind: mcp, server_id: web, allowed: [search, 'fetch']}\n",
    'a: é€𝄞\nb: [é, 𝄞, "x\\u00e9"]\nc: \'a\u2028b\'\nd: "e\x85f"\nsurfaces: {}\n',
    "a:\r\n  - x\r\n  - y\r\nsurfaces: {as_consumer: {agents: {}}}\r\n",
    "k: |\n  two\n  lines\nf: >-\n  folded\n  text\ng: !!str 12\nsurfaces: null\n",
    "%YAML 1.1\n---\nsurfaces: {as_consumer: {agents: {}}}\n...\n",
    "a: &a {x: 1}\nb: *a\nc: [*a, *a]\nsurfaces: {as_consumer: {agents: {}}}\n",
    "a: 2024-01-02\nb: 1_000\nc: 0x1F\nd: .inf\ne: ~\nf: yes\n? g\n: h\n",
    "\ufeffa: 1\n",
    "",
    "# only a comment\n",
    "[" * MAX_DEPTH + "]" * MAX_DEPTH,
]
REFUSED = [
    "a: 1\na: 2\n",
    POLICY + "          - alias: x\n            alias: y\n",
    "a:\n  b: 1\n  c: 2\n  b: 3\n",
    "surfaces:\n\tas_consumer: {}\n",
    "a: 1\n---\nb: 2\n",
    "a: [1, 2\n",
    "a: b: c\n",
    "a: *nowhere\n",
    "a: &x 1\nb: &x 2\n",
    "a: 'unclosed\n",
    "a:\n  - 1\n  b: 2\n",
    "a: 1\x07\n",
    "a: \x00\n",
    "a: 'b\x00'\n",
    'a: "\\ud800"\n',
    "? [a, b]\n: 1\n",
    "a: 2024-13-45\n",
    "a: !custom 1\n",
    "a: !!python/object:os.system ls\n",
    "a: {<<: [1]}\n",
    "a: &a [*a]\n",
    "a: &a {<<: *a}\n",
    billion_laughs(10),
    "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    "- " * (MAX_DEPTH + 1) + "x\n",
    "[" * 50_000,
    "%YAML 2.0\n---\na: 1\n",
    "a: `b`\n",
    "a: @b\n",
    "- a\nb: c\n",
]


@pytest.mark.parametrize("text", VALID + REFUSED)
def test_it_reads_every_text_as_the_pure_python_parser_does(text: str) -> None:
    assert same(load_policy(text), pure_python(text))
    assert same(load_policy(text.encode()), pure_python(text.encode()))


@needs_libyaml
@pytest.mark.parametrize("text", VALID)
def test_it_reads_valid_text_with_libyaml_alone(text: str) -> None:
    assert same(c_only(text), pure_python(text))


@needs_libyaml
def test_it_reports_repeated_keys_at_their_positions_from_the_c_parser() -> None:
    text = "a: 1\nb:\n  c: 2\n  c: 3\né: x\né: y\n"
    loaded = c_only(text)
    found = [(d.code, d.path, d.line, d.column) for d in loaded.diagnostics]
    assert found == [("duplicate-key", "b.c", 4, 3), ("duplicate-key", '["é"]', 6, 1)]
    assert "first appears on line 3" in loaded.diagnostics[0].message
    assert same(loaded, pure_python(text))


@needs_libyaml
def test_it_records_the_same_positions_from_the_c_parser() -> None:
    text = export_text(fixture_policies()[0]) + "extra: [é, {𝄞: 'x'}]\n"
    loaded, reference = c_only(text), pure_python(text)
    assert loaded.source.values == reference.source.values
    assert loaded.source.keys == reference.source.keys
    last = text.count("\n")
    assert loaded.source.keys[("extra",)] == (last, 1)
    assert loaded.source.values[("extra", 1, "𝄞")] == (last, 16)  # columns count characters


@needs_libyaml
def test_it_refuses_an_alias_bomb_on_the_c_path_before_expanding_it() -> None:
    loaded = c_only(billion_laughs(10))
    assert [d.code for d in loaded.diagnostics] == ["yaml-too-large"]


@needs_libyaml
def test_it_reads_with_libyaml_when_pyyaml_has_it() -> None:
    assert yaml_io._LOADERS[0] is yaml_io._CLoader
    assert yaml_io._LOADERS[-1] is yaml_io._Loader


def test_it_reads_everything_in_pure_python_without_libyaml() -> None:
    text = export_text(fixture_policies()[0])
    with loaders(yaml_io._Loader):
        loaded = load_policy(text)
    assert (loaded.refused, loaded.diagnostics) == (False, [])
    assert export_text(loaded.data) == text


DEEP = {
    "brackets": "[" * 100_000 + "]" * 100_000,
    "unclosed brackets": "[" * 500_000,
    "braces": "{a: " * 100_000 + "}" * 100_000,
    "dashes": "- " * 100_000 + "x\n",
}


@pytest.mark.parametrize("shape", DEEP)
def test_it_refuses_deep_nesting_with_a_diagnostic_not_a_crash(shape: str) -> None:
    # In a child process: libyaml's C composer would end it with a segfault (pytest with it).
    assert len(DEEP[shape].encode()) <= WEB_MAX_BYTES
    program = (
        "import json, sys\n"
        "from tests.policy.domain.test_yaml_io_parsers import DEEP, pure_python\n"
        "from policy.domain import yaml_io\n"
        "text = DEEP[sys.argv[1]]\n"
        "found = [[repr(d) for d in load(text).diagnostics] for load in\n"
        "    (yaml_io.load_policy, pure_python)]\n"
        "print(json.dumps({'loader': yaml_io._LOADERS[0].__name__, 'found': found}))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", program, shape],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    result = json.loads(child.stdout)
    assert result["loader"] == ("_CLoader" if yaml.__with_libyaml__ else "_Loader")
    [[refusal], reference] = result["found"]
    assert "code='yaml-too-large'" in refusal
    assert "line=1," in refusal
    assert [refusal] == reference


# A policy exported before libyaml read anything: these bytes are what stored hashes cover.
EXPORTED = """\
# traitdeck-format: 1
# sha256: bf9cd6691bb7db07ddd655955b68164f5af550e87b307f41fe6864f96790aff5
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - kind: mcp
            server_id: web
            allowed:
              - search
              - fetch
            tool_traits:
              search:
                strategy:
                  - exploration
              '*':
                strategy: []
            note: {long}
            text: |-
              two
              lines
            odd: "a\\Lb"
            quoted: 'yes'
            number: '12'
            empty: ''
            nothing: null
            unicode: é€𝄞
"""


def test_it_exports_the_bytes_it_exported_before_libyaml() -> None:
    long = "word " * 60 + "end"
    connection = {
        "kind": "mcp",
        "server_id": "web",
        "allowed": ["search", "fetch"],
        "tool_traits": {"search": {"strategy": ["exploration"]}, "*": {"strategy": []}},
        "note": long,
        "text": "two\nlines",
        "odd": "a\u2028b",
        "quoted": "yes",
        "number": "12",
        "empty": "",
        "nothing": None,
        "unicode": "é€𝄞",
    }
    policy = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": [connection]}}}}}
    text = export_text(policy)
    assert text == EXPORTED.format(long=long)
    assert export_text(load_policy(text).data) == text


def test_it_exports_every_fixture_policy_byte_for_byte_after_reading_it() -> None:
    policies = fixture_policies()
    assert len(policies) > 100
    for policy in policies:
        text = export_text(policy)
        loaded = load_policy(text)
        assert (loaded.diagnostics, loaded.data) == ([], policy)
        assert export_text(loaded.data) == text


@settings(max_examples=300, deadline=None)
@given(st.one_of(written_policies(), st.text()))
def test_it_reads_generated_text_as_the_pure_python_parser_does(text: str) -> None:
    assert same(load_policy(text), pure_python(text))
