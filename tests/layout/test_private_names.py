"""No module uses another module's ``_private`` name (issue 36): what several modules share is
public, so a reader sees who depends on it. Found by reading every product module's imports and
attribute reads (the AST), not by grepping.

A module's own private names, dunders (``__version__``) and private names of third-party
libraries (``django``…) are not counted: only names of the product's own modules."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.product import PRODUCT, ROOT, product_sources


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    aliases: dict[str, str] = {}  # local name -> product module it names
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] not in PRODUCT or base == here:
                continue
            for alias in node.names:
                if is_private(alias.name):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {base}.{alias.name}")
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PRODUCT:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            target = _dotted(node.value)
            if target is None or target.split(".")[0] not in aliases:
                continue
            head, _, rest = target.partition(".")
            module = ".".join(filter(None, [aliases[head], rest]))
            if module != here and _is_module(module):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}.{node.attr}")
    return found


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_no_module_uses_another_modules_private_names() -> None:
    found = [use for path in product_sources() for use in private_uses(path)]
    assert found == [], "private names used across modules:\n" + "\n".join(found)
