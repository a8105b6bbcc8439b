"""Tool health kept from live rounds: tallies written at ingest, read per window with advice.

Ingest calls :func:`tool_health_change` once per batch (and writes what it returns); pages and
the API read :func:`observe.health.report.tool_health_report`.
"""

from __future__ import annotations

from observe.health.tallies import (
    tool_health_change,
    tool_health_drop_before,
    tool_health_forget,
)

__all__ = [
    "tool_health_change",
    "tool_health_drop_before",
    "tool_health_forget",
]
