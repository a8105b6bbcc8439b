"""Tool health kept from live rounds: tallies written at ingest, read per window with advice.

Ingest calls :func:`tool_health_record` once per batch; pages and the API read
:func:`observe.health.report.tool_health_report`.
"""

from __future__ import annotations

from observe.health.tallies import (
    tool_health_change,
    tool_health_drop_before,
    tool_health_forget,
    tool_health_record,
)

__all__ = [
    "tool_health_change",
    "tool_health_drop_before",
    "tool_health_forget",
    "tool_health_record",
]
