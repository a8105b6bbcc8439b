"""The stored form of assemblies and event JSON on PostgreSQL (issue 39): every value reads back
as it was, rows stored before read as they were, and the format is frozen (a stored value must
stay readable by every later release)."""

from __future__ import annotations

import hashlib
import statistics

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from observe.domain.packing import DICTIONARY, pack, unpack
from tests.observe.domain.test_drift import simulated

#: JSON as ingest stores it: finite floats, integers within the 64 bits the checks allow.
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
    max_leaves=40,
)


@given(JSON)
def test_every_value_reads_back_as_it_was_packed(value: object) -> None:
    assert unpack(pack(value)) == value


def test_a_value_stored_before_packing_reads_as_its_json_text() -> None:
    # Migration 0013 turned each stored JSON into its text's bytes without rewriting it.
    stored = b'{"tools": ["react.read"], "slots": {"0:0": {"tool": ["2026-01-01T00:00:00.000Z"]}}}'
    assert unpack(stored) == orjson.loads(stored)
    assert unpack(memoryview(b"[1, 2]")) == [1, 2]


def test_bytes_that_are_neither_packed_nor_json_are_refused_with_their_first_byte() -> None:
    with pytest.raises(ValueError, match=r"version byte b'\\x02'"):
        unpack(b"\x02\x28\xb5\x2f\xfd")


def test_a_value_packed_by_the_first_release_still_reads() -> None:
    # Packed by observe.domain.packing version 1 (zstandard 0.25.0): if this fails, stored rows
    # no longer read — a changed dictionary or frame must take a new version byte instead.
    recorded = bytes.fromhex(
        "0128b52ffd20b0150300a4037b31322d3037543135663063366135342d386431652d346234312d39663565"
        "2d32643763316130623965333172656164225d7d7d2c6e756c6c7d0d00fc850098035c48024a7a411b99"
        "20694182e700700a6fe850140fba515180781928b5892b"
    )
    assert unpack(recorded) == {
        "slots": {
            "0:0": {
                "tool": [
                    "2026-12-07T10:00:00.000Z",
                    "5f0c6a54-8d1e-4b41-9f5e-2d7c1a0b9e31",
                    "react.read",
                ]
            }
        },
        "tools": ["react.read"],
        "gen": {},
        "first": None,
        "start": None,
        "end": None,
    }


def test_the_dictionary_is_the_one_version_1_was_stored_with() -> None:
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "31b0eeec09b9ab7bcbf91f21d5136f2d26efd140900f3e153d0bf87987466450"
    ), "a changed dictionary makes stored values unreadable: give it a new version byte"


def test_a_simulated_rounds_assembly_packs_to_under_half_its_json() -> None:
    assemblies = [assembly for _, assembly in simulated(150)]
    ratios = [len(pack(a)) / len(orjson.dumps(a)) for a in assemblies]
    assert all(unpack(pack(a)) == a for a in assemblies)
    assert statistics.mean(ratios) < 0.45, statistics.mean(ratios)
