"""The stored form of a round's assembly and an event's JSON on PostgreSQL (issue 39): JSON
compressed with zstd against a preset dictionary of the words every round and event repeats.

A round's assembly is ~1.6 KB of JSON whose keys, event types and field names repeat in every
round, and an event's JSON ~110 bytes of the same words: too small for PostgreSQL's own
compression (it starts at ~2 KB a row) and mostly the same words, which a dictionary turns into
a few bytes each. Measured on 100k simulator events: an assembly 1,309 bytes as ``jsonb`` →
~580 packed, an event's JSON ~108 → ~60 (docs/performance.md, "Bytes per event").

The format: one version byte (``0x01``), then a zstd frame made with :data:`DICTIONARY`. Bytes
that start otherwise are JSON text as it was stored before (the migration turns the old
``jsonb``/``json`` columns into their text's bytes without rewriting each value): read as such.
The dictionary is frozen with its version byte: changing it would make every stored value
unreadable. A better one takes the next byte, and this module reads both.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
import zstandard

VERSION = 1
_HEAD = bytes([VERSION])

#: The words of an assembly (``observe.domain.rounds``) and of an event's stored JSON, in the
#: order and shape they are written (zstd finds the longest match anywhere in it; the words
#: nearest the end cost the fewest bits). Frozen: see the module's text.
DICTIONARY = (
    b'{"attempt":0,"max_actions":2,"policy_hash":null,"multi_action_mode":"on","inferred":false}'
    b'{"attempt":0,"action_index":0,"action":"call_tool","tool_id":"","params":{}}'
    b'{"attempt":0,"action_index":1,"tool_id":"","strategy":["exploration"]}'
    b'{"attempt":0,"action_index":0,"tool_id":"","strategy":["exploitation"]}'
    b'{"attempt":0,"action_index":1,"tool_id":"","strategy":["neutral"]}'
    b'{"attempt":0,"action_index":0,"tool_id":"","code":"multi_action_bundle_strategy_incompatible",'
    b'"extra":{"index":1,"tool_id":"","strategy":["exploitation"],"first_index":0,'
    b'"first_tool_id":"","first_strategy":["exploration"]}}'
    b'{"attempt":0,"action_index":0,"tool_id":"","code":"max_actions_exceeded","message":""}'
    b'{"attempt":0,"action_index":1,"tool_id":"","tool_call_id":"call_","key":"","scope":"slot"}'
    b'{"attempt":0,"action_index":0,"tool_id":"","tool_call_id":"tc_","timeout_s":30}'
    b'{"attempt":0,"action_index":0,"tool_id":"","tool_call_id":"call_","status":"ok",'
    b'"duration_ms":120}{"attempt":0,"action_index":0,"tool_id":"","tool_call_id":"call_",'
    b'"status":"error","error":""}{"attempt":0,"exec_code_complete":true}'
    b'{"attempt":0,"outcome":"ok","error_code":null,"error_message":null}'
    b'{"first":["2026-01-01T00:00:00.000Z","00000000-0000-0000-0000-000000000000"],'
    b'"start":["2026-01-01T00:00:00.000Z","","",2,null,"on",3,false],'
    b'"end":["2026-01-01T00:00:00.000Z","","ok",null,null],'
    b'"gen":{"0":["2026-01-01T00:00:00.000Z","",true],"1":["2026-01-01T00:00:00.000Z",""]},'
    b'"tools":["react.delegate","react.write"],"slots":{"1:1":{'
    b'"action.rejected":["2026-01-01T00:00:00.000Z","","multi_action_bundle_strategy_incompatible"],'
    b'"ledger.dedup":["2026-01-01T00:00:00.000Z","","tc_",0,"slot",""],'
    b'"tool.timeout":["2026-01-01T00:00:00.000Z","","call_",30]},"0:0":{'
    b'"tool.early_started":["2026-01-01T00:00:00.000Z","","tc_"],'
    b'"tool.started":["2026-01-01T00:00:00.000Z","","call_"],'
    b'"tool.finished":["2026-01-01T00:00:00.000Z","","call_","ok",120,null,null],'
    b'"action.accepted":["2026-01-01T00:00:00.000Z","",["neutral"]],'
    b'"action.observed":["2026-01-01T00:00:00.000Z","","call_tool",""],'
    b'"params":["2026-01-01T00:00:00.000Z","",null,"{\\"'
    b'"],"tool":["2026-01-01T00:00:00.000Z","",""]},"0:1":{"tool":["2026-'
)

_local = threading.local()  # zstd's (de)compressors are not to be shared between threads


def _codecs() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    made = getattr(_local, "codecs", None)
    if made is None:
        dictionary = zstandard.ZstdCompressionDict(
            DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT
        )
        dictionary.precompute_compress(level=3)  # once per thread, not once per value
        made = _local.codecs = (
            zstandard.ZstdCompressor(
                level=3, dict_data=dictionary, write_checksum=False, write_dict_id=False
            ),
            zstandard.ZstdDecompressor(dict_data=dictionary),
        )
    return made


def pack(value: Any) -> bytes:
    """``value`` as stored: the version byte, then its compact JSON compressed. What is stored
    comes from checked events, whose integers are within 64 bits (``core.vocabulary``'s bounds),
    which orjson writes and reads back exactly."""
    return _HEAD + _codecs()[0].compress(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


def json_of(stored: bytes | memoryview) -> bytes:
    """The JSON text of a stored value: decompressed when :func:`pack` made it, as it is when an
    older row holds it."""
    data = bytes(stored)
    if data[:1] == _HEAD:
        return _codecs()[1].decompress(data[1:])
    if data[:1] not in (b"{", b"[", b'"', b"n", b"t", b"f", b"-") and not data[:1].isdigit():
        raise ValueError(f"not a packed value: version byte {data[:1]!r}")
    return data


def unpack(stored: bytes | memoryview) -> Any:
    """The value :func:`pack` stored, or the JSON text an older row holds."""
    return orjson.loads(json_of(stored))
