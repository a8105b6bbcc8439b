"""Rules read off the product's source (issue 34): every YAML text goes through the one bounded
loader (``policy.domain.yaml_io``: size, node and alias-expansion limits), and no environment
variable is read under a name that policy text could supply. ``conformance/`` and ``tests/`` are
exempt (they import the runtime and build fixtures)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.product import PRODUCT

ROOT = Path(__file__).resolve().parents[2]
#: The one bounded loader: it drives PyYAML's composer itself.
YAML_LOADER = Path("policy/domain/yaml_io.py")
_PYYAML_LOADS = frozenset(
    {
        "load",
        "safe_load",
        "full_load",
        "unsafe_load",
        "load_all",
        "safe_load_all",
        "compose",
        "compose_all",
        "parse",
        "scan",
    }
)
_LOADER_CLASSES = frozenset(
    {
        "Loader",
        "SafeLoader",
        "CSafeLoader",
        "CLoader",
        "FullLoader",
        "UnsafeLoader",
        "BaseLoader",
        "CBaseLoader",
        "CFullLoader",
        "CUnsafeLoader",
    }
)
#: Reads of a variable whose name is not written in the code, each checked by hand: the name
#: comes from Traitdeck's own settings code or an operator's command line, never from policy
#: text — except discovery's, which reads only a name ``TRAITDECK_MCP_CREDENTIALS`` allows.
DYNAMIC_ENV_READS = {
    ("config/settings.py", "env_int"),  # called with literal names below it
    ("config/settings.py", "env_list"),
    ("config/settings.py", "env_bool"),
    ("discovery/mcp_list.py", "credential"),
    # config/server.py reads its socket timeouts before Django's settings exist; called with
    # literal names only.
    ("config/server.py", "seconds_setting"),  # checks the operator's allowlist first
}


def product_files() -> Iterator[tuple[Path, ast.Module]]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" not in relative.parts:
                yield relative, ast.parse(path.read_text(encoding="utf-8"), str(relative))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def test_no_product_module_calls_pyyamls_loaders_directly() -> None:
    found = []
    for path, tree in product_files():
        if path == YAML_LOADER:
            continue
        for node in ast.walk(tree):
            name = _dotted(node.func) if isinstance(node, ast.Call) else ""
            parts = name.split(".")
            loads = parts[0] == "yaml" and parts[-1] in _PYYAML_LOADS
            loader = any(part in _LOADER_CLASSES for part in parts[1:]) and parts[0] == "yaml"
            if loads or loader:
                found.append(f"{path}:{node.lineno} {name}(...)")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("yaml"):
                names = {alias.name for alias in node.names}
                if names & (_PYYAML_LOADS | _LOADER_CLASSES | {"composer", "loader", "CParser"}):
                    found.append(f"{path}:{node.lineno} from {node.module} import {names}")
    assert found == [], "read YAML through policy.domain.yaml_io.load_document: " + ", ".join(found)


def _env_reads(tree: ast.Module) -> Iterator[tuple[str, ast.expr, int]]:
    """(enclosing function, the name expression, line) of every environment read."""
    functions: dict[ast.AST, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                functions.setdefault(inner, node.name)
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            name = _dotted(node.func)
            if name in {"os.getenv", "os.environ.get", "environ.get", "os.environ.pop"}:
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and _dotted(node.value) in {"os.environ", "environ"}:
            key = node.slice
        if key is not None:
            yield functions.get(node, ""), key, node.lineno


def _literal(key: ast.expr) -> bool:
    """A name written in the code: a string, an f-string over literal parts and loop names
    (``f"TRAITDECK_KDCUBE_{n}"``), or an UPPER_CASE constant."""
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str)
    if isinstance(key, ast.JoinedStr):
        return isinstance(key.values[0], ast.Constant)  # a fixed prefix names the family
    return isinstance(key, ast.Name) and key.id.isupper()


def test_no_environment_variable_is_read_under_a_name_from_policy_text() -> None:
    found = []
    for path, tree in product_files():
        for function, key, line in _env_reads(tree):
            if not _literal(key) and (str(path), function) not in DYNAMIC_ENV_READS:
                found.append(f"{path}:{line} in {function or 'the module'}: {ast.unparse(key)}")
    assert found == [], "environment read under a computed name: " + ", ".join(found)
