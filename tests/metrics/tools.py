"""What the metric tests need from the machine: Debian's prometheus package (``prometheus`` and
``promtool``; ``scripts/ensure-system-deps metrics`` installs it). Missing, a test fails with
``CI=true`` and skips elsewhere, saying how to install it."""

from __future__ import annotations

import os
import shutil

import pytest


def need(program: str) -> str:
    found = shutil.which(program)
    if found:
        return found
    message = (
        f"{program} is not installed"
        " (scripts/ensure-system-deps metrics: apt-get install prometheus)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
