"""The compact catalog (issue 37 §2): the whole text ``layout.build_compact_tools_block`` renders
for the model when ``tool_catalog_detail`` is ``compact``, for every ``catalog`` input, against
Traitdeck's ``engine.catalog.catalog.render_compact`` over its resolution (the same listing the
full catalog draws). Traitdeck is held byte for byte to the text without the lines the runtime
takes from each tool's code (``purpose``, ``params``, ``constraint``: the built-ins' and the
named-service module's own docs); the whole text is kept beside it (``runtime_text``)."""

from __future__ import annotations

from typing import Any

NAME = "compact"
MIN_CASES = 60
HEADER = "X"
#: The lines of a compact entry the runtime takes from the tool's code (``purpose``, ``params``
#: and each param, ``constraint``): what a policy does not determine.
CODE_LINE_PREFIXES = ("  purpose: ", "  params:", "    - ", "  constraint: ")


def without_code_lines(text: str) -> str:
    """The runtime's compact text without the lines taken from the tools' code."""
    return "\n".join(line for line in text.split("\n") if not line.startswith(CODE_LINE_PREFIXES))


def record(rt: Any) -> list[dict[str, Any]]:
    from conformance.families.catalog import runtime_catalogs

    out = []
    for name, case, catalog in runtime_catalogs(rt):
        text = rt.layout.build_compact_tools_block(catalog, header=HEADER)
        out.append(
            {
                "id": name,
                "input": case,
                "runtime": without_code_lines(text),
                "runtime_text": text,
            }
        )
    return out


def predict(case: dict[str, Any]) -> Any:
    from engine.catalog.catalog import render_compact
    from engine.tools.manifest import parse_manifest
    from engine.tools.resolution import resolve_consumer

    resolution = resolve_consumer(
        case["policy"], case["agent"], parse_manifest(case["manifest"]), role=case["role"]
    )
    return render_compact(resolution.listing, header=HEADER)
