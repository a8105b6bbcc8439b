"""Who may do what: the one table every page and API route is checked against.

Roles (DESIGN §6) are Django groups, each including the one before: ``viewer`` < ``editor`` <
``publisher``; superusers have all. ``PAGES`` maps a URL name to the role each HTTP method
needs; ``API`` maps ``(METHOD, "/api/v1/…" path template)`` to the role a browser session needs
(routes that only runtime tokens use say ``TOKEN``; ``PUBLIC`` needs nothing). A route missing
from the table is refused — and the role-matrix test fails — so every new route must be added.

``TOKENS`` names the API routes a runtime token (``Authorization: Bearer …``) may use, with
the scope it must carry (``ANY_SCOPE``: any token). A request that sends an ``Authorization``
header is judged by its token alone: a missing, unknown or revoked token is 401 on every route,
a route not in ``TOKENS`` takes no token at all (401), a token without the scope is 403.

``accounts.middleware.AccessMiddleware`` enforces it (pages and API alike), once, before any
view runs: it decides who is asking (session or token), whether they may, and — for a session's
unsafe API request — Django's CSRF check. The API's auth classes (``accounts.auth``) only hand
its decision to the views and describe it in the OpenAPI schema;
``python manage.py role_matrix`` prints it as the README's Markdown table. A ``PAGES`` key
``"<namespace>:*"`` covers every URL of that namespace (the Django admin). A method missing
under a URL name falls back to ``"*"``; HEAD and OPTIONS count as GET.
"""

from __future__ import annotations

from typing import Final

VIEWER: Final = "viewer"
EDITOR: Final = "editor"
PUBLISHER: Final = "publisher"
ROLES: Final = (VIEWER, EDITOR, PUBLISHER)
#: Needs no login at all.
PUBLIC: Final = "public"
#: Only for runtime tokens (Bearer); the token's scope is checked by the route itself.
TOKEN: Final = "token"
#: Any logged-in user, even one without a role (login/logout, "whom to ask").
ANY_USER: Final = "any-user"
#: Only superusers (the Django admin).
SUPERUSER: Final = "superuser"
#: The API's docs and OpenAPI schema: viewer, or anyone while ``DEBUG`` is on (a developer's
#: machine). In production (``DEBUG`` off) they need a login like every other page.
DOCS: Final = "docs"
#: Imports: a preview (API ``dry_run`` true, its default; the import form's ``op`` other than
#: ``apply``) is read-only, so viewer; replacing the draft is editor.
EDITOR_TO_APPLY: Final = "editor-to-apply"

#: URL name → {HTTP method or "*": required role}.
PAGES: dict[str, dict[str, str]] = {
    "overview": {"GET": VIEWER},
    "no-role": {"GET": ANY_USER},
    "login": {"*": PUBLIC},
    "favicon": {"GET": PUBLIC},
    "history-shortcut": {"GET": VIEWER},
    "tools-shortcut": {"GET": VIEWER},
    "logout": {"*": PUBLIC},
    "password_change": {"*": VIEWER},
    "password_change_done": {"GET": VIEWER},
    "password_reset": {"*": PUBLIC},
    "password_reset_done": {"GET": PUBLIC},
    "password_reset_confirm": {"*": PUBLIC},
    "password_reset_complete": {"GET": PUBLIC},
    "admin:*": {"*": SUPERUSER},
    "api:openapi-json": {"GET": DOCS},
    "api:openapi-view": {"GET": DOCS},
    "api:api-root": {"GET": VIEWER},
    "policy:agents": {"GET": VIEWER},
    "policy:agent-add": {"POST": EDITOR},
    "policy:agent": {"GET": VIEWER},
    "policy:agent-rename": {"POST": EDITOR},
    "policy:agent-remove": {"POST": EDITOR},
    "policy:manifest": {"GET": VIEWER, "POST": EDITOR},
    "policy:suite": {"GET": VIEWER, "POST": EDITOR},
    "policy:connection-add": {"GET": VIEWER, "POST": EDITOR},
    "policy:connection-edit": {"GET": VIEWER, "POST": EDITOR},
    "policy:connection-remove": {"POST": EDITOR},
    "policy:connection-move": {"POST": EDITOR},
    # GET: the URL the page leaves in the address bar after the POST opens the connection page.
    "policy:connection-discover": {"GET": VIEWER, "POST": EDITOR},
    "policy:agent-discover": {"GET": VIEWER, "POST": EDITOR},
    "policy:mcp-server": {"GET": VIEWER, "POST": EDITOR},
    "policy:connection-suggestions": {"GET": VIEWER, "POST": EDITOR},
    "policy:tool-edit": {"GET": VIEWER, "POST": EDITOR},
    "policy:tool-preview": {"POST": VIEWER},
    "policy:effective": {"GET": VIEWER},
    "policy:catalog": {"GET": VIEWER},
    "policy:playground": {"GET": VIEWER, "POST": VIEWER},
    "policy:import": {"GET": VIEWER, "POST": EDITOR_TO_APPLY},
    "policy:export": {"GET": VIEWER},
    "policy:export-descriptor": {"GET": VIEWER, "POST": VIEWER},
    "policy:versions": {"GET": VIEWER},
    "policy:version": {"GET": VIEWER},
    "policy:diff": {"GET": VIEWER},
    "policy:impact": {"GET": VIEWER},
    "policy:impact-round": {"GET": VIEWER},
    "policy:impact-round-by-ids": {"GET": VIEWER},
    "policy:publish": {"GET": PUBLISHER, "POST": PUBLISHER},
    "policy:rollback": {"GET": PUBLISHER, "POST": PUBLISHER},
    "policy:draft-discard": {"POST": EDITOR},
    "policy:glossary": {"GET": VIEWER},
    "policy:edit-from-version": {"POST": EDITOR},
    "policy:kdcube-push": {"POST": PUBLISHER},
    # Reading KDCube's props to preview them is a read; applying goes through policy:import.
    "policy:kdcube-import": {"GET": VIEWER},
    "observe:live": {"GET": VIEWER},
    "observe:history": {"GET": VIEWER},
    "observe:round": {"GET": VIEWER},
    "observe:round-by-ids": {"GET": VIEWER},
    "observe:tools": {"GET": VIEWER},
    "observe:tool": {"GET": VIEWER},
    # The audit log shows every change with its before/after (manifests, whole policies):
    # publishers (and superusers) read it, as they answer for what goes live.
    "audit:log": {"GET": PUBLISHER},
    "audit:export-csv": {"GET": PUBLISHER},
    "accounts:tokens": {"GET": PUBLISHER, "POST": PUBLISHER},
    "accounts:token-revoke": {"GET": PUBLISHER, "POST": PUBLISHER},
}

#: URL names outside ``API`` that answer JSON: their refusals are JSON too (401, not a redirect).
JSON_PAGES: frozenset[str] = frozenset({"api:openapi-json"})

#: (method, path template as in the OpenAPI schema) → required role.
API: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/health"): PUBLIC,
    ("GET", "/api/v1/whoami"): ANY_USER,
    ("POST", "/api/v1/policy/validate"): VIEWER,
    ("POST", "/api/v1/policy/import"): EDITOR_TO_APPLY,
    ("GET", "/api/v1/policy/export.yaml"): VIEWER,
    ("POST", "/api/v1/policy/export-into"): VIEWER,
    ("GET", "/api/v1/agents/{agent}/effective"): VIEWER,
    ("GET", "/api/v1/agents/{agent}/catalog"): VIEWER,
    ("POST", "/api/v1/agents/{agent}/dry-run"): VIEWER,
    ("GET", "/api/v1/agents"): VIEWER,
    ("POST", "/api/v1/agents"): EDITOR,
    ("PATCH", "/api/v1/agents/{agent}"): EDITOR,
    ("DELETE", "/api/v1/agents/{agent}"): EDITOR,
    ("GET", "/api/v1/agents/{agent}/connections"): VIEWER,
    ("POST", "/api/v1/agents/{agent}/connections"): EDITOR,
    ("PATCH", "/api/v1/agents/{agent}/connections/{index}"): EDITOR,
    ("DELETE", "/api/v1/agents/{agent}/connections/{index}"): EDITOR,
    ("POST", "/api/v1/agents/{agent}/connections/{index}/move"): EDITOR,
    ("PUT", "/api/v1/agents/{agent}/connections/{index}/tools/{key}"): EDITOR,
    ("PUT", "/api/v1/agents/{agent}/manifest"): EDITOR,
    ("DELETE", "/api/v1/agents/{agent}/manifest"): EDITOR,
    ("POST", "/api/v1/agents/{agent}/mcp/{server_id}/discover"): EDITOR,
    ("GET", "/api/v1/versions"): VIEWER,
    ("GET", "/api/v1/versions/diff"): VIEWER,
    ("GET", "/api/v1/versions/{number}"): VIEWER,
    ("GET", "/api/v1/versions/{number}/export.yaml"): VIEWER,
    ("POST", "/api/v1/versions"): PUBLISHER,
    ("POST", "/api/v1/versions/{number}/rollback"): PUBLISHER,
    ("GET", "/api/v1/kdcube"): VIEWER,
    ("POST", "/api/v1/kdcube/push"): PUBLISHER,
    ("POST", "/api/v1/kdcube/pull"): EDITOR_TO_APPLY,
    ("POST", "/api/v1/kdcube/props-changed"): TOKEN,
    ("GET", "/api/v1/agents/{agent}/config.yaml"): TOKEN,
    ("POST", "/api/v1/events"): TOKEN,
    ("POST", "/api/v1/bridge/status"): TOKEN,
    ("GET", "/api/v1/rounds"): VIEWER,
    ("GET", "/api/v1/rounds/export.jsonl"): VIEWER,
    ("GET", "/api/v1/tools/health"): VIEWER,
    ("POST", "/api/v1/policy/impact"): VIEWER,
    ("GET", "/api/v1/rounds/{agent}/{turn_id_and_iteration}"): VIEWER,
    ("GET", "/api/v1/audit"): PUBLISHER,
    ("GET", "/api/v1/metrics"): TOKEN,
}

#: Any runtime token (whatever its scopes).
ANY_SCOPE: Final = "*"

#: (method, path template) → the scope a runtime token needs there. Every other route refuses
#: tokens (401), whatever the token.
TOKENS: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/whoami"): ANY_SCOPE,
    ("GET", "/api/v1/agents/{agent}/config.yaml"): "config:read",
    ("POST", "/api/v1/events"): "events:write",
    ("POST", "/api/v1/bridge/status"): "events:write",
    # The bridge tells Traitdeck that KDCube's props changed (Traitdeck reads them itself).
    ("POST", "/api/v1/kdcube/props-changed"): "events:write",
    ("GET", "/api/v1/rounds"): "events:read",
    ("GET", "/api/v1/rounds/export.jsonl"): "events:read",
    ("GET", "/api/v1/rounds/{agent}/{turn_id_and_iteration}"): "events:read",
    ("GET", "/api/v1/tools/health"): "events:read",
    # Prometheus scrapes with a token of its own that can read nothing else.
    ("GET", "/api/v1/metrics"): "metrics:read",
}
