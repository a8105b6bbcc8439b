"""The refusals every operation shares, declared once in the OpenAPI schema.

Each router declares the answers of its own handlers. The shared ones come from the one mapping
in ``config.api.install_error_handlers``, the one body reader (``web.api_io``) and ninja's own
parameter checks, so they are added here, to each operation that can reach them, instead of being
repeated (and forgotten) in every router. A client generated from the schema then knows every
status it can get (DESIGN §6), and schemathesis holds the API to it.
"""

from __future__ import annotations

from typing import Any, Final

from accounts.access import API as ACCESS
from accounts.access import DOCS, PUBLIC, TOKEN

#: ``{"error": "<plain sentence>", …details}`` (DESIGN §6).
ERROR_SCHEMA: Final = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}

_AUTHENTICATED: Final = {
    401: "Not authenticated: log in, or send a runtime token.",
    403: "Authenticated, but not allowed (role or token scope).",
    503: "The store is busy; nothing was stored. Send the request again after Retry-After.",
}
_PARAMETERS: Final = {422: "A parameter or the body does not have the expected shape."}
_PATH: Final = {404: "No such agent, connection, tool, round or version."}
_BODY: Final = {
    400: "The body is not parseable (or If-Match is not a quoted revision).",
    413: "The body is over the size limit.",
    415: "The body's content type is not one this operation reads.",
    422: "The body is parseable but has the wrong shape.",
}
_METHODS: Final = ("get", "put", "post", "delete", "patch")


def _shared_errors(operation: dict[str, Any]) -> dict[int, str]:
    errors: dict[int, str] = {}
    if operation.get("security"):
        errors |= _AUTHENTICATED
    parameters = operation.get("parameters", [])
    if parameters:
        errors |= _PARAMETERS
    if any(parameter.get("in") == "path" for parameter in parameters):
        errors |= _PATH
    if "requestBody" in operation:
        errors |= _BODY
    return errors


def _merge_spelled_twice(responses: dict[Any, Any]) -> None:
    """One status per response: ninja keys its own by ``int`` and ``openapi_extra`` by ``str``,
    so both ``200`` and ``"200"`` can be there, which JSON writes as the key ``"200"`` twice (a
    lenient reader keeps one; Swagger UI refuses the whole document). The ``openapi_extra``
    entry says more (the content type), so it wins, over the int one's fields."""
    for status in [key for key in responses if isinstance(key, int)]:
        spelled = str(status)
        if spelled in responses:
            responses[spelled] = {**responses.pop(status), **responses[spelled]}


def declare_shared_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add to each operation of ``schema`` the error statuses it can answer and does not declare
    itself (an operation's own declaration, with its richer body, wins). An operation whose
    handler takes no ninja auth but which the access table (``accounts.access``) gives a role
    is declared as needing the session: the access middleware asks for one."""
    for path, path_item in schema.get("paths", {}).items():
        for method in _METHODS:
            operation = path_item.get(method)
            if operation is None:
                continue
            role = ACCESS.get((method.upper(), path))
            if not operation.get("security") and role not in (None, PUBLIC, TOKEN, DOCS):
                operation["security"] = [{"SessionAuth": []}]
            responses = operation.setdefault("responses", {})
            _merge_spelled_twice(responses)
            for status, description in sorted(_shared_errors(operation).items()):
                if str(status) in responses:
                    continue
                responses.setdefault(
                    status,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": ERROR_SCHEMA}},
                    },
                )
    return schema
