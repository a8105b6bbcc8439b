"""The domain packages stay importable without Django: the CLI and CI pipelines depend on it."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("django", "ninja", "channels", "daphne")


@pytest.mark.parametrize("package", ["policy.domain", "observe.domain"])
def test_it_imports_every_domain_module_without_django(package: str) -> None:
    package_dir = ROOT.joinpath(*package.split("."))
    modules = [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(package_dir)])]
    code = (
        "import importlib, sys\n"
        f"for name in {[package, *modules]!r}: importlib.import_module(name)\n"
        f"leaked = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(leaked))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{package} pulled in {result.stdout.strip()}"
