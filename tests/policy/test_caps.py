"""The web's caps (``policy-too-large``): API and page imports and edits over a cap are refused
and store nothing; management commands and the ``traitdeck`` CLI have no caps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from policy.selectors import draft_state
from tests.markup import assert_alert, find_all
from tests.policy.test_api import post_json, post_yaml

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
IMPORT = "/api/v1/policy/import"

#: One agent, one connection, four tools.
POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {name: jobs, kind: python, ref: jobs.py, alias: jobs,
             allowed: [search, export, launch, report]}
"""
TWO_AGENTS = POLICY + "      helper:\n        tools: []\n"


def codes(response: Any) -> list[str]:
    return [d["code"] for d in response.json()["diagnostics"]]


@override_settings(TRAITDECK_MAX_TOOLS=3)
@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_an_api_import_over_the_tools_cap_is_422_policy_too_large(
    admin_client: Client, dry_run: str
) -> None:
    response = post_yaml(admin_client, f"{IMPORT}?dry_run={dry_run}", POLICY)
    assert response.status_code == 422
    assert "policy-too-large" in codes(response)
    [diagnostic] = [d for d in response.json()["diagnostics"] if d["code"] == "policy-too-large"]
    assert "4 tools" in diagnostic["message"]
    assert "TRAITDECK_MAX_TOOLS" in diagnostic["message"]
    assert draft_state().revision == 0


@override_settings(TRAITDECK_MAX_TOOLS=4, TRAITDECK_MAX_AGENTS=1, TRAITDECK_MAX_CONNECTIONS=1)
def test_an_api_import_at_the_caps_is_applied(admin_client: Client) -> None:
    response = post_yaml(admin_client, f"{IMPORT}?dry_run=false", POLICY)
    assert response.status_code == 200, response.content
    assert draft_state().revision == 1


@override_settings(TRAITDECK_MAX_AGENTS=1)
def test_an_api_edit_over_the_agents_cap_is_422_and_stores_nothing(admin_client: Client) -> None:
    assert post_yaml(admin_client, f"{IMPORT}?dry_run=false", POLICY).status_code == 200
    response = post_json(admin_client, "/api/v1/agents", {"name": "helper"})
    assert response.status_code == 422
    body = response.json()
    assert "policy-too-large" in body["error"]
    assert "TRAITDECK_MAX_AGENTS" in body["error"]
    assert [d["code"] for d in body["diagnostics"]] == ["policy-too-large"]
    assert draft_state().revision == 1
    assert list(draft_state().agents) == ["main"]


@override_settings(TRAITDECK_MAX_CONNECTIONS=1)
def test_the_editor_page_refuses_a_connection_over_the_cap(admin_client: Client) -> None:
    assert post_yaml(admin_client, f"{IMPORT}?dry_run=false", POLICY).status_code == 200
    response = admin_client.post(
        "/policy/agents/main/connections/new/",
        {"kind": "python", "base_revision": "1", "ref": "more.py", "alias": "more", "allowed": "x"},
    )
    assert response.status_code == 422, response.status_code
    said = assert_alert(response.content.decode(), "the change is refused (policy-too-large)")
    assert "(TRAITDECK_MAX_CONNECTIONS)" in said
    assert draft_state().revision == 1


@override_settings(TRAITDECK_MAX_AGENTS=1)
def test_the_import_page_shows_the_cap_and_applies_nothing(admin_client: Client) -> None:
    response = admin_client.post(
        "/policy/import/", {"text": TWO_AGENTS, "base_revision": "0", "op": "apply"}
    )
    assert response.status_code == 422
    [diagnostic, *_] = find_all(response.content.decode(), "li", data_code="policy-too-large")
    assert "(TRAITDECK_MAX_AGENTS)" in diagnostic.text
    assert draft_state().revision == 0


@override_settings(TRAITDECK_MAX_AGENTS=1)
def test_a_draft_over_a_cap_can_still_shrink_from_the_web(
    admin_client: Client, tmp_path: Path
) -> None:
    # The management command has no caps: the draft ends up over the web's.
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_AGENTS + "      third:\n        tools: []\n")
    call_command("policy", "import", str(policy), stdout=open(os.devnull, "w"))  # noqa: SIM115
    assert len(draft_state().agents) == 3
    response = admin_client.delete("/api/v1/agents/third")
    assert response.status_code == 200, response.content
    assert len(draft_state().agents) == 2


def test_the_traitdeck_cli_has_no_caps(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_AGENTS)
    script = Path(sys.executable).with_name("traitdeck")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "policy.cli"]
    env = {**os.environ, "TRAITDECK_MAX_AGENTS": "1", "TRAITDECK_MAX_TOOLS": "1"}
    done = subprocess.run(
        [*command, "validate", str(policy)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    assert "policy-too-large" not in done.stdout + done.stderr
    assert done.returncode in (0, 1), done.stderr  # 1 only for the policy's own errors
