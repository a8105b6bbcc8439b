"""Roles: the ``user_role`` command, the "no role yet" page and the refusals people see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from accounts.roles import has_role, user_role
from audit.models import AuditEntry
from tests.conftest import make_user
from tests.markup import alerts, assert_alert, find, find_all, page_text, table_rows, text_of

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_user_role_gives_a_role_and_records_it_in_the_audit_log() -> None:
    ana = make_user("ana", None)
    call_command("user_role", "ana", "editor", stdout=open("/dev/null", "w"))  # noqa: SIM115
    ana.refresh_from_db()
    assert user_role(ana) == "editor"
    assert has_role(ana, "viewer")
    assert not has_role(ana, "publisher")
    entry = AuditEntry.objects.get(action="role.grant")
    assert (entry.actor_name, entry.target) == ("cli", "user ana")
    assert (entry.before, entry.after) == ({"role": None}, {"role": "editor"})


def test_user_role_replaces_the_role_and_remove_takes_it_away() -> None:
    make_user("ana", "viewer")
    call_command("user_role", "ana", "publisher", stdout=open("/dev/null", "w"))  # noqa: SIM115
    call_command(
        "user_role",
        "ana",
        "publisher",
        "--remove",
        "--actor",
        "maria",
        stdout=open("/dev/null", "w"),  # noqa: SIM115
    )
    from django.contrib.auth import get_user_model

    assert user_role(get_user_model().objects.get(username="ana")) is None
    entry = AuditEntry.objects.get(action="role.remove")
    assert (entry.actor_name, entry.before, entry.after) == (
        "maria",
        {"role": "publisher"},
        {"role": None},
    )


def test_removing_a_role_the_user_does_not_hold_changes_nothing() -> None:
    publisher = make_user("ana", "publisher")
    call_command("user_role", "ana", "editor", "--remove", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert user_role(publisher) == "publisher"


@pytest.mark.parametrize(("args", "code"), [(["nobody", "viewer"], 1), (["ana", "admin"], 2)])
def test_user_role_exit_codes(args: list[str], code: int) -> None:
    make_user("ana", None)
    with pytest.raises(CommandError) as raised:
        call_command("user_role", *args)
    assert raised.value.returncode == code


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["ghost", "viewer"], 1, "no user named 'ghost'"),
        (["ghost", "owner"], 2, "unknown role 'owner'"),
        (["ghost"], 2, "the following arguments are required"),
    ],
)
def test_the_real_command_prints_one_line_and_exits_as_design_says(
    args: list[str], code: int, message: str, tmp_path: Path
) -> None:
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "x" * 40 + "0123456789",
        "PATH": "",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run(
        [sys.executable, "manage.py", "user_role", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_user_without_a_role_is_refused_everywhere_and_told_whom_to_ask(
    no_role_client: Client,
) -> None:
    make_user("maria", "publisher")
    make_user("root", "superuser")
    make_user("edna-the-editor", "editor")
    for url in ("/", "/policy/", "/live/", "/live/history/"):
        response = no_role_client.get(url)
        assert response.status_code == 403, url
        html = response.content.decode()
        assert_alert(html, "no role yet")
        granters = find(html, "span", class_="granters")
        assert [name.text for name in granters.find_all("strong")] == ["maria", "root"]
        assert granters.text == "maria, root"
        assert "edna-the-editor" not in page_text(html)  # an editor cannot give roles
    api = no_role_client.get("/api/v1/agents")
    assert api.status_code == 403
    assert "no role yet" in api.json()["error"]


def test_the_no_role_page_and_logout_stay_open_to_a_user_without_a_role(
    no_role_client: Client,
) -> None:
    make_user("maria", "publisher")
    page = no_role_client.get("/accounts/no-role/")
    assert page.status_code == 200
    html = page.content.decode()
    assert text_of(html, "h1") == "No role yet"
    assert find(html, "span", class_="granters").text == "maria"
    assert no_role_client.get("/api/v1/whoami").status_code == 200
    assert no_role_client.post("/accounts/logout/").status_code == 302


def test_a_viewer_reads_but_cannot_change_the_draft(viewer_client: Client) -> None:
    assert viewer_client.get("/policy/").status_code == 200
    refused = viewer_client.post("/policy/agents/add/", {"name": "x", "base_revision": "0"})
    assert refused.status_code == 403
    assert alerts(refused.content.decode()) == ["This needs the editor role."]
    api = viewer_client.post("/api/v1/agents", data={"name": "x"}, content_type="application/json")
    assert (api.status_code, api.json()) == (403, {"error": "This needs the editor role."})


def test_a_viewer_may_preview_an_import_but_not_apply_it(viewer_client: Client) -> None:
    text = "surfaces:\n  as_consumer:\n    agents:\n      main: {}\n"
    preview = viewer_client.post(
        "/api/v1/policy/import?dry_run=true", data=text, content_type="application/yaml"
    )
    assert preview.status_code == 200
    assert preview.json()["applied"] is False
    applied = viewer_client.post(
        "/api/v1/policy/import?dry_run=false", data=text, content_type="application/yaml"
    )
    assert applied.status_code == 403
    form = viewer_client.post("/policy/import/", {"text": text, "op": "apply", "base_revision": 0})
    assert form.status_code == 403
    assert viewer_client.post("/policy/import/", {"text": text, "op": "preview"}).status_code == 200


def test_an_anonymous_api_call_gets_401_json_and_a_page_a_login_redirect(client: Client) -> None:
    api = client.get("/api/v1/agents")
    assert api.status_code == 401
    assert api.json()["error"].startswith("Authentication required")
    assert client.get("/policy/")["Location"] == "/accounts/login/?next=/policy/"


def test_the_admin_stays_superuser_only(publisher_client: Client, admin_client: Client) -> None:
    assert publisher_client.get("/admin/").status_code == 403
    assert admin_client.get("/admin/").status_code == 200


def test_role_matrix_prints_the_readme_table() -> None:
    from io import StringIO

    out = StringIO()
    call_command("role_matrix", stdout=out)
    text = out.getvalue()
    assert "| page | anonymous | no role | viewer | editor | publisher | superuser |" in text
    assert "| `POST policy:agent-add` | · | · | · | ✓ | ✓ | ✓ |" in text
    assert "| `POST /api/v1/policy/import` | · | · | preview | ✓ | ✓ | ✓ |" in text


def test_only_publishers_see_the_token_list_and_the_audit_and_tokens_links(
    viewer_client: Any, publisher_client: Any
) -> None:
    from accounts.tokens import runtime_token_create

    runtime_token_create(name="secret-runtime", scopes=["config:read"])
    viewer_page = viewer_client.get("/").content.decode()
    assert "secret-runtime" not in page_text(viewer_page)
    assert find_all(viewer_page, "a", href="/policy/")  # the navigation is there
    assert not find_all(viewer_page, "a", href="/audit/")
    assert not find_all(viewer_page, "a", href="/tokens/")
    publisher_page = publisher_client.get("/").content.decode()
    assert "secret-runtime" in [row["Name"] for row in table_rows(find(publisher_page, "table"))]
    assert "Audit log" in [link.text for link in find_all(publisher_page, "a", href="/audit/")]
    assert "Tokens" in [link.text for link in find_all(publisher_page, "a", href="/tokens/")]
