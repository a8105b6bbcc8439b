"""The OpenAPI schema declares the refusals every operation shares (``config.api_schema``), so a
client generated from it knows each status it can get; schemathesis holds the API to it
(``test_schema.py``, in ``make test-hardening``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.access import API as ACCESS
from accounts.access import DOCS, PUBLIC
from config.api import api

METHODS = ("get", "put", "post", "delete", "patch")


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    paths = api.get_openapi_schema()["paths"]
    return [(m, p, item[m]) for p, item in paths.items() for m in METHODS if m in item]


def declared(operation: dict[str, Any]) -> set[int]:
    return {int(status) for status in operation["responses"]}


@pytest.mark.parametrize(("method", "path", "operation"), operations(), ids=lambda v: str(v)[:50])
def test_each_operation_declares_the_refusals_it_can_reach(
    method: str, path: str, operation: dict[str, Any]
) -> None:
    statuses = declared(operation)
    if operation.get("security"):
        assert {401, 403, 503} <= statuses
    if "requestBody" in operation:
        assert {400, 413, 415, 422} <= statuses
    if any(p["in"] == "path" for p in operation.get("parameters", [])):
        assert {404, 422} <= statuses


def test_an_operations_own_declaration_wins() -> None:
    (validate,) = [op for m, p, op in operations() if p.endswith("/policy/validate")]
    body = validate["responses"][413]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RefusalOut"}  # diagnostics, not only "error"


def test_health_needs_nothing_and_declares_no_refusal() -> None:
    (health,) = [op for m, p, op in operations() if p.endswith("/v1/health")]
    assert declared(health) == {200}


@pytest.mark.django_db
def test_the_served_schema_has_them_too(admin_client: Client) -> None:
    served = admin_client.get("/api/openapi.json").json()
    whoami = served["paths"]["/api/v1/whoami"]["get"]["responses"]
    assert {"401", "403", "503"} <= set(whoami)
    assert whoami["401"]["content"]["application/json"]["schema"]["required"] == ["error"]


def test_each_operation_the_access_table_guards_declares_its_credential() -> None:
    # Some handlers take no ninja auth: the access middleware asks for the session (or a token).
    for method, path, operation in operations():
        role = ACCESS.get((method.upper(), path))
        if role not in (None, PUBLIC, DOCS):
            assert operation.get("security"), f"{method.upper()} {path}"
            assert {401, 403} <= declared(operation)
