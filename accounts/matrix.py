"""The access table as a page/endpoint × role matrix (for the README and ``role_matrix``)."""

from __future__ import annotations

from accounts.access import (
    ANY_SCOPE,
    ANY_USER,
    DOCS,
    EDITOR,
    EDITOR_TO_APPLY,
    PUBLIC,
    PUBLISHER,
    SUPERUSER,
    TOKEN,
    VIEWER,
)

#: Columns of the matrix, weakest first.
COLUMNS = ("anonymous", "no role", VIEWER, EDITOR, PUBLISHER, SUPERUSER)

#: For each table value: the first column that may use the route (``None``: a token only).
_FIRST = {
    PUBLIC: "anonymous",
    ANY_USER: "no role",
    DOCS: VIEWER,  # as in production (DEBUG off); anyone with DEBUG on
    VIEWER: VIEWER,
    EDITOR: EDITOR,
    PUBLISHER: PUBLISHER,
    SUPERUSER: SUPERUSER,
}


def cells(role: str) -> list[str]:
    """One row's cells: ✓ allowed, · refused (a token-only route: "token" in every cell)."""
    if role == TOKEN:
        return ["token"] * len(COLUMNS)
    if role == EDITOR_TO_APPLY:
        # Previewing is viewer; applying is editor.
        viewer = COLUMNS.index(VIEWER)
        return [
            "·" if i < viewer else ("preview" if i == viewer else "✓") for i in range(len(COLUMNS))
        ]
    first = COLUMNS.index(_FIRST[role])
    return ["·" if i < first else "✓" for i in range(len(COLUMNS))]


def token_cell(scope: str | None) -> str:
    """The runtime-token column of an API row: the scope a token needs, or · (no token)."""
    if scope is None:
        return "·"
    return "any token" if scope == ANY_SCOPE else f"`{scope}`"


def markdown_matrix(
    pages: dict[str, dict[str, str]],
    api: dict[tuple[str, str], str],
    tokens: dict[tuple[str, str], str] | None = None,
) -> str:
    tokens = tokens or {}
    head = "| {} | " + " | ".join(COLUMNS) + " |\n|---|" + "---|" * len(COLUMNS) + "\n"
    api_head = (
        "| endpoint | "
        + " | ".join(COLUMNS)
        + " | runtime token |\n|---|"
        + "---|" * (len(COLUMNS) + 1)
        + "\n"
    )
    page_rows = [
        f"| `{method} {name}` | " + " | ".join(cells(role)) + " |"
        for name, methods in pages.items()
        for method, role in methods.items()
    ]
    api_rows = [
        f"| `{method} {path}` | "
        + " | ".join(cells(role))
        + f" | {token_cell(tokens.get((method, path)))} |"
        for (method, path), role in api.items()
    ]
    return (
        "Pages (by URL name; `*` is any method):\n\n"
        + head.format("page")
        + "\n".join(page_rows)
        + "\n\nAPI (browser sessions; `token`: runtime tokens only; the last column: the scope a"
        " runtime token needs, · where no token is taken):\n\n"
        + api_head
        + "\n".join(api_rows)
        + "\n"
    )
