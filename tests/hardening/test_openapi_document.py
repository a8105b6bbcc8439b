"""The served OpenAPI document is one Swagger UI (``/api/docs``) and every generator can read: no
key appears twice in a JSON object (a lenient JSON reader keeps the last one silently, Swagger's
YAML parser refuses the whole document), and it is valid OpenAPI 3 under a strict validator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from openapi_spec_validator import validate


class RepeatedKey(ValueError):
    pass


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RepeatedKey(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def strict_loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_no_repeated_keys)


def test_it_refuses_a_repeated_key_that_json_loads_would_hide() -> None:
    with pytest.raises(RepeatedKey):
        strict_loads('{"responses": {"200": {}, "200": {}}}')


@pytest.mark.django_db
def test_it_serves_a_document_with_no_repeated_key_that_a_strict_validator_accepts(
    admin_client: Client,
) -> None:
    response = admin_client.get("/api/openapi.json")
    assert response.status_code == 200
    document = strict_loads(response.content.decode())
    validate(document)
    export = document["paths"]["/api/v1/rounds/export.jsonl"]["get"]["responses"]["200"]
    assert "application/x-ndjson" in export["content"]
