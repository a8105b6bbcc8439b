"""KDCube on the pages: a version's push, retry, import from KDCube, the config-drift card."""

from __future__ import annotations

from typing import Any

import pytest

from kdcube import services as kdcube
from policy.services import draft_replace
from policy.versions import policy_publish
from tests.kdcube.kdcube_replay import ReplayServer
from tests.kdcube.test_push import VERSION
from tests.markup import find, find_all, text_of, texts

pytestmark = pytest.mark.django_db


@pytest.fixture
def version() -> int:
    draft_replace(data=VERSION, base_revision=None, user="test")
    return policy_publish(actor="test", message="v", confirm_warnings=True).number


def test_it_shows_nothing_of_kdcube_without_a_target(publisher_client: Any, version: int) -> None:
    page = publisher_client.get(f"/policy/versions/{version}/").content.decode()
    assert not find_all(page, id="kdcube-push")
    assert not find_all(page, class_="kdcube-push")


def test_it_shows_not_pushed_then_pushed_with_the_hash(
    server: ReplayServer, publisher_client: Any, version: int
) -> None:
    page = publisher_client.get(f"/policy/versions/{version}/").content.decode()
    assert text_of(page, "p", class_="kdcube-push-status") == "not pushed"
    server.expect("push-read", "push-write", "push-read-back")
    answer = publisher_client.post(f"/policy/versions/{version}/push/", {"overwrite": "on"})
    assert answer.status_code == 302
    page = publisher_client.get(f"/policy/versions/{version}/").content.decode()
    status = find(page, "p", class_="kdcube-push-status")
    assert status.text.startswith("pushed at ")
    assert status.find("code").text == kdcube.push_status([version])[version].subtree_hash[:12]


def test_it_shows_kdcubes_answer_when_the_token_expired(
    server: ReplayServer, publisher_client: Any, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAITDECK_KDCUBE_TOKEN", "")
    server.expect("get-without-token")
    publisher_client.post(f"/policy/versions/{version}/push/")
    page = publisher_client.get(f"/policy/versions/{version}/").content.decode()
    assert text_of(page, "p", class_="kdcube-push-status").startswith(
        "failed: KDCube refused the token (401: No token provided): it may have expired"
    )
    assert find(page, "section", id="kdcube-push").find("button").text == "Retry the push"


def test_a_viewer_cannot_push(server: ReplayServer, viewer_client: Any, version: int) -> None:
    assert viewer_client.post(f"/policy/versions/{version}/push/").status_code == 403


def test_it_previews_kdcubes_props_as_an_import_and_names_the_secret(
    server: ReplayServer, viewer_client: Any
) -> None:
    server.expect("push-read")
    page = viewer_client.get("/policy/kdcube/import/").content.decode()
    assert text_of(page, "p", class_="kdcube-source").startswith("Read from KDCube")
    assert find_all(page, "p", class_="kdcube-secret")
    assert all("secret, not imported" in p for p in texts(page, "p", class_="kdcube-secret"))
    # raw: nowhere in the answer, not even in an attribute or a script.
    assert "resolved-knowledge-secret" not in page


def test_the_overview_and_versions_page_show_config_drift(
    server: ReplayServer, publisher_client: Any, version: int
) -> None:
    server.expect("push-read", "push-write", "push-read-back", "drift-read")
    kdcube.kdcube_push(actor="test", overwrite=True)
    kdcube.kdcube_observe(source="listener", updated_by="admin@kdcube")
    for url in ("/", "/policy/versions/"):
        page = publisher_client.get(url).content.decode()
        drift = find(page, "section", id="config-drift")
        assert drift.find("h2").text == "Config drift in KDCube"
        assert "(reported by KDCube as `admin@kdcube`): `main` → connection `web` → " in drift.text
        assert "`web_search`: strategy [exploration] → [exploitation]" in drift.text
        assert drift.find("a", class_="button").text == "Import as draft"
        assert drift.find("button", type="submit").text == f"Push version {version} again"


def test_the_api_pushes_reports_drift_and_imports(
    server: ReplayServer, publisher_client: Any, version: int
) -> None:
    server.expect("push-read", "push-write", "push-read-back")
    pushed = publisher_client.post(
        "/api/v1/kdcube/push", {"overwrite": True}, content_type="application/json"
    ).json()
    assert (pushed["version"], pushed["status"]) == (version, "pushed")
    server.expect("drift-read")
    kdcube.kdcube_observe(source="poll")
    status = publisher_client.get("/api/v1/kdcube").json()
    assert status["config_drift"]["differs"] == ["agents.main"]
    assert status["pushed"]["hash"] == pushed["hash"]
    server.expect("drift-read")
    preview = publisher_client.post("/api/v1/kdcube/pull").json()
    assert preview["applied"] is False
    added = [line for line in preview["diff"].splitlines() if line.startswith("+")]
    assert any(line.endswith("- exploitation") for line in added)
    assert preview["secrets_not_imported"] == []


def test_the_api_says_when_no_target_is_configured(publisher_client: Any) -> None:
    answer = publisher_client.get("/api/v1/kdcube")
    assert answer.status_code == 404
    assert "No KDCube target is configured" in answer.json()["error"]


def test_the_versions_list_reads_pushes_in_one_query(
    server: ReplayServer, publisher_client: Any, version: int
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert publisher_client.get("/policy/versions/").status_code == 200
        return sum("kdcubepush" in q["sql"].lower() for q in ctx.captured_queries)

    one = queries()
    for n in range(3):
        data = {"surfaces": {"as_consumer": {"agents": {f"a{n}": {"tools": []}}}}}
        draft_replace(data=data, base_revision=None, user="test")
        policy_publish(actor="test", message=f"v{n}", confirm_warnings=True)
    assert queries() == one == 1
