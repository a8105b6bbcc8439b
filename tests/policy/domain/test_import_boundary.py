"""The domain packages, the core and the CLI stay importable without Django: the CLI and CI
pipelines depend on it (``.importlinter`` states the same contract for ``make lint``)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("django", "ninja", "channels", "daphne")


@pytest.mark.parametrize(
    "package",
    [
        "core",
        "engine",
        "policy.domain",
        "observe.domain",
        "kdcube.domain",
        "kdcube.bridge.domain",
        "simulator",
    ],
)
def test_it_imports_every_domain_module_without_django(package: str) -> None:
    package_dir = ROOT.joinpath(*package.split("."))
    walked = pkgutil.walk_packages([str(package_dir)], prefix=f"{package}.")
    modules = [m.name for m in walked]
    _assert_imports_without_django(package, modules)


def test_it_runs_the_cli_shell_without_django() -> None:
    _assert_imports_without_django("policy.cli", [])


def _assert_imports_without_django(package: str, modules: list[str]) -> None:
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
