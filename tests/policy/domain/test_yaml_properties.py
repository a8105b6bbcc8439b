from __future__ import annotations

import datetime
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vocabulary import MAX_MAGNITUDE
from policy.domain.yaml_io import export_text, load_policy

# Text that stresses quoting and block scalars: breaks, spaces, indicators, odd characters.
tricky_text = st.text(alphabet=st.sampled_from(list(" \n\t\r#:-'\"|>&*!%@`{}[],?ab\x85\u2028")))
# No NUL: a policy holding one is refused (text-encoding: PostgreSQL cannot store it).
texts = st.one_of(st.text(st.characters(codec="utf-8", exclude_characters="\x00")), tricky_text)
# Integers within the bound a document may hold (core.numbers; beyond: refused).
integers = st.integers(-(MAX_MAGNITUDE - 1), MAX_MAGNITUDE - 1)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    integers,
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=25,
)


def policy_with(agents: dict[str, Any]) -> dict[str, Any]:
    return {"surfaces": {"as_consumer": {"agents": agents}}}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(texts, json_like, max_size=4))
def test_it_reads_back_every_export_exactly(agents: dict[str, Any]) -> None:
    policy = policy_with(agents)
    text = export_text(policy)
    loaded = load_policy(text)
    assert loaded.diagnostics == []
    assert loaded.data == policy
    assert export_text(loaded.data) == text
    assert export_text(policy) == text


# YAML the way people and other tools write it: flow or block style, other indents and widths,
# keys that are not text, dates; sometimes behind a shared anchor and merge key.
yaml_scalars = st.one_of(
    scalars,
    st.dates(),
    st.datetimes(min_value=datetime.datetime(1900, 1, 1)),  # noqa: DTZ001 naive like YAML's
)
yaml_keys = st.one_of(texts, integers, st.booleans(), st.dates())
yaml_values = st.recursive(
    yaml_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(yaml_keys, children, max_size=4)
    ),
    max_leaves=25,
)


@st.composite
def written_policies(draw: st.DrawFn) -> str:
    agents = draw(st.dictionaries(yaml_keys, yaml_values, max_size=4))
    document: dict[Any, Any] = {"surfaces": {"as_consumer": {"agents": agents}}}
    document.update(draw(st.dictionaries(texts, yaml_values, max_size=2)))
    text: str = yaml.safe_dump(
        document,
        default_flow_style=draw(st.sampled_from([False, True, None])),
        indent=draw(st.integers(2, 6)),
        width=draw(st.integers(20, 200)),
        allow_unicode=draw(st.booleans()),
        sort_keys=draw(st.booleans()),
    )
    if draw(st.booleans()):
        text = "defaults: &d {strategy: [neutral]}\nshared: {<<: *d, extra: *d}\n" + text
    return text


@settings(max_examples=200, deadline=None)
@given(st.one_of(written_policies(), st.text()))
def test_fmt_is_idempotent(text: str) -> None:
    first = load_policy(text)
    if first.refused:
        return
    formatted = export_text(first.data)
    again = load_policy(formatted)
    assert again.diagnostics == []
    assert again.data == first.data
    assert export_text(again.data) == formatted


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_it_never_raises_on_any_text(text: str) -> None:
    loaded = load_policy(text)
    assert loaded.refused == (loaded.data is None)
    assert loaded.refused == any(d.severity == "error" for d in loaded.diagnostics)


@settings(max_examples=200, deadline=None)
@given(st.binary())
def test_it_never_raises_on_any_bytes(raw: bytes) -> None:
    loaded = load_policy(raw)
    assert loaded.refused == (loaded.data is None)
    assert loaded.refused == any(d.severity == "error" for d in loaded.diagnostics)
