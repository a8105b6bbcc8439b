"""Every third-party module our code imports is named (and pinned) in pyproject.toml.

A module that only arrives as someone else's dependency disappears the day that dependency drops
it (``channels_redis`` was imported by the settings and installed by nothing).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
#: Our own packages, as pyproject.toml's package list names them, and the tests.
FIRST_PARTY = {name.rstrip("*") for name in PACKAGES["find"]["include"]} | {"tests"}
SOURCES = [*sorted(FIRST_PARTY), "manage.py"]
#: Imported only where the module is optional at run time (never on a server).
ALLOWED_UNDECLARED: set[str] = set()
#: The recorder (``make conformance``) runs the runtime's code in a venv of its own: what only it
#: imports is named in its requirements file instead (the runtime itself comes from KDCUBE_SRC).
RECORDER_REQUIREMENTS = ROOT / "conformance" / "requirements-kdcube.txt"
RUNTIME_PACKAGE = "kdcube_ai_app"
#: A dotted path in a settings string: ``channels_redis.core.RedisChannelLayer``.
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){2,}")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, str]:
    """Normalized distribution name → its requirement line, from dependencies and every extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines.extend(extra)
    declared = {}
    for line in lines:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        assert name, line
        declared[_normalize(name.group(0))] = line
    return declared


def _imported_modules() -> dict[str, str]:
    """Top-level module name → one file importing it (absolute imports only)."""
    found: dict[str, str] = {}
    files: list[Path] = []
    for source in SOURCES:
        path = ROOT / source
        files.extend(path.rglob("*.py") if path.is_dir() else [path])
    for file in files:
        if "migrations" in file.parts:
            continue
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(file.relative_to(ROOT)))
    # Settings name modules in strings (backends, middleware, storages): Django imports them.
    for file in (ROOT / "config").glob("settings*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if is_text and DOTTED.fullmatch(node.value):
                found.setdefault(node.value.split(".")[0], str(file.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = _declared()
    distributions = packages_distributions()
    missing = []
    for module, where in sorted(_imported_modules().items()):
        if module in FIRST_PARTY or module in sys.stdlib_module_names:
            continue
        if module in ALLOWED_UNDECLARED:
            continue
        if where.startswith("conformance/") and _recorder_names(module):
            continue
        owners = {_normalize(d) for d in distributions.get(module, [])}
        if not owners:
            missing.append(f"{module} (imported by {where}) is not installed at all")
        elif not owners & declared.keys():
            missing.append(f"{module} (imported by {where}) comes from {sorted(owners)}")
    assert not missing, "imports that pyproject.toml does not name:\n" + "\n".join(missing)


def _recorder_names(module: str) -> bool:
    """Whether the recorder's own venv provides ``module`` (the runtime, or a requirement line
    named like it)."""
    if module == RUNTIME_PACKAGE:
        return True
    lines = RECORDER_REQUIREMENTS.read_text().splitlines()
    names = {_normalize(re.split(r"[=<>\[ ]", line.strip())[0]) for line in lines}
    return _normalize(module) in names


def test_every_dependency_is_pinned() -> None:
    loose = [line for line in _declared().values() if "==" not in line]
    assert not loose, f"dependencies without an exact pin: {loose}"
