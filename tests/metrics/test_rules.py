"""deploy/prometheus/traitdeck-rules.yml: valid for promtool, and its unit tests (which alert
fires when, with which labels and text) pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.metrics.tools import need

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def test_the_rules_are_valid() -> None:
    done = subprocess.run(
        [need("promtool"), "check", "rules", "traitdeck-rules.yml"],
        cwd=RULES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def test_the_rules_unit_tests_pass() -> None:
    done = subprocess.run(
        [need("promtool"), "test", "rules", "traitdeck-rules.test.yml"],
        cwd=RULES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
