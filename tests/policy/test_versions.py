"""Publishing, versions, diff, rollback, and the runtime's config.yaml endpoint.

Over 500 lines on purpose: one version's life (publish, diff, roll back, serve) in order, the
later steps reusing the versions the earlier ones made through the same helpers."""

from __future__ import annotations

import copy
import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from accounts.tokens import runtime_token_create
from audit.models import AuditEntry
from observe.models import Round
from observe.selectors import rounds_overview
from observe.services import events_ingest
from policy.domain.yaml_io import load_policy, split_header
from policy.models import PolicyVersion
from policy.selectors import draft_state
from policy.services import draft_change, draft_replace
from policy.versions import policy_publish
from tests.markup import assert_alert, find, find_all, text_of, texts

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "policy" / "sample" / "sample-policy.yaml"
VERSIONS = "/api/v1/versions"
CONFIG = "/api/v1/agents/main/config.yaml"


@pytest.fixture
def sample() -> dict[str, Any]:
    data = load_policy(SAMPLE.read_bytes()).data
    draft_replace(data=data, base_revision=None)
    return copy.deepcopy(data)


def set_search_strategy(strategy: list[str]) -> None:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        tools = doc["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
        tools[0]["tool_traits"]["search"] = {"strategy": strategy}
        return doc

    draft_change(edit=edit, base_revision=None)


def publish(client: Client, message: str = "first", **extra: Any) -> Any:
    return client.post(
        VERSIONS,
        {"message": message, "confirm_warnings": True, **extra},
        content_type="application/json",
    )


def bearer(*scopes: str) -> dict[str, str]:
    token = runtime_token_create(name="rt-" + "-".join(scopes), scopes=list(scopes)).secret
    return {"Authorization": f"Bearer {token}"}


# --- publish ------------------------------------------------------------------------------------


def test_publishing_records_an_immutable_version_with_hashes(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    response = publish(publisher_client, "the sample")
    assert response.status_code == 201
    body = response.json()
    assert (body["number"], body["in_force"], body["author"]) == (1, True, "as-publisher")
    version = PolicyVersion.objects.get(number=1)
    assert version.sha256 == hashlib.sha256(version.body.encode()).hexdigest()
    assert body["agent_hashes"]["main"] == version.agent_hashes["main"]
    entry = AuditEntry.objects.get(action="policy.publish")
    assert (entry.actor_name, entry.target, entry.message) == (
        "as-publisher",
        "version 1",
        "the sample",
    )


def test_publishing_needs_a_message(sample: dict[str, Any], publisher_client: Client) -> None:
    response = publish(publisher_client, "  ")
    assert response.status_code == 422
    assert "message is required" in response.json()["error"]
    assert not PolicyVersion.objects.exists()


def test_warnings_need_a_confirmation(sample: dict[str, Any], publisher_client: Client) -> None:
    response = publish(publisher_client, confirm_warnings=False)
    assert response.status_code == 422
    body = response.json()
    assert body["needs_confirmation"] is True
    assert {d["code"] for d in body["diagnostics"]} == {"id-key-ignored"}
    count = len(body["diagnostics"])
    assert body["error"].startswith(f"The draft has {count} warnings: confirm")  # not warning(s)
    assert not PolicyVersion.objects.exists()


def test_errors_block_publishing(sample: dict[str, Any], publisher_client: Client) -> None:
    set_search_strategy(["bogus"])
    response = publish(publisher_client)
    assert response.status_code == 422
    assert response.json()["error"].startswith("The draft has 1 error: fix it first")
    assert not PolicyVersion.objects.exists()


def test_an_unchanged_draft_is_not_published_twice(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    assert publish(publisher_client).status_code == 201
    again = publish(publisher_client, "again")
    assert again.status_code == 422
    assert "identical to version 1" in again.json()["error"]


def test_a_stale_if_match_is_refused(sample: dict[str, Any], publisher_client: Client) -> None:
    stale = draft_state().revision - 1
    response = publisher_client.post(
        VERSIONS,
        {"message": "m", "confirm_warnings": True},
        content_type="application/json",
        headers={"If-Match": f'"{stale}"'},
    )
    assert response.status_code == 409
    assert not PolicyVersion.objects.exists()


def test_editors_and_viewers_cannot_publish(
    sample: dict[str, Any], editor_client: Client, viewer_client: Client
) -> None:
    assert publish(editor_client).status_code == 403
    assert publish(viewer_client).status_code == 403
    assert viewer_client.get(VERSIONS).status_code == 200


# --- diff and history -----------------------------------------------------------------------------


def test_the_diff_says_per_tool_what_changes(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client)
    set_search_strategy(["neutral"])
    body = publisher_client.get(f"{VERSIONS}/diff?from=published&to=draft").json()
    assert body["tools"] == ["main · workspace_jobs.search: strategy exploration → neutral"]
    removed = [line["text"] for line in body["lines"] if line["kind"] == "remove"]
    added = [line["text"] for line in body["lines"] if line["kind"] == "add"]
    assert any(text[1:].strip() == "- exploration" for text in removed), removed
    assert any(text[1:].strip() == "- neutral" for text in added), added
    page = publisher_client.get("/policy/publish/").content.decode()
    assert texts(page, "ul", class_="tool-changes") == [
        "main · workspace_jobs.search: strategy exploration → neutral"
    ]


def test_the_history_page_marks_the_version_in_force(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    page = publisher_client.get("/policy/versions/").content.decode()
    rows = find_all(page, "tr", class_="version")
    assert [row.attrs["data-number"] for row in rows] == ["2", "1"]
    assert [chip.text for chip in rows[0].find_all("span", class_="chip")] == ["in force"]
    assert not rows[1].find_all("span", class_="chip ok")


# --- rollback -----------------------------------------------------------------------------------


def test_rollback_publishes_a_copy_and_sets_the_draft(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    response = publisher_client.post(
        f"{VERSIONS}/1/rollback", {"message": "back"}, content_type="application/json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["number"], body["rollback_of"]) == (3, 1)
    three, one = PolicyVersion.objects.get(number=3), PolicyVersion.objects.get(number=1)
    assert three.sha256 == one.sha256
    assert draft_state().text.split("\n", 2)[1] == f"# sha256: {one.sha256}"
    assert AuditEntry.objects.filter(action="policy.rollback", target="version 3").exists()


def test_rollback_over_unpublished_changes_asks_first(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    set_search_strategy(["exploitation"])  # not published
    asked = publisher_client.post(
        f"{VERSIONS}/1/rollback", {"message": "back"}, content_type="application/json"
    )
    assert asked.status_code == 422
    assert asked.json()["needs_confirmation"] is True
    assert "never published" in asked.json()["error"]
    assert PolicyVersion.objects.count() == 2
    done = publisher_client.post(
        f"{VERSIONS}/1/rollback",
        {"message": "back", "confirm_unpublished": True},
        content_type="application/json",
    )
    assert done.status_code == 201
    before = AuditEntry.objects.get(action="policy.rollback").before
    assert before["draft_revision"] == draft_state().revision - 1


def test_rolling_back_to_the_version_in_force_is_refused(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client)
    response = publisher_client.post(
        f"{VERSIONS}/1/rollback", {"message": "x"}, content_type="application/json"
    )
    assert response.status_code == 422
    assert "already in force" in response.json()["error"]


# --- the runtime endpoint -----------------------------------------------------------------------


def test_config_yaml_needs_a_token_with_config_read(sample: dict[str, Any], client: Client) -> None:
    assert client.get(CONFIG).status_code == 401
    assert client.get(CONFIG, headers=bearer("events:write")).status_code == 403


def test_config_yaml_is_404_until_something_is_published(
    sample: dict[str, Any], client: Client
) -> None:
    response = client.get(CONFIG, headers=bearer("config:read"))
    assert response.status_code == 404
    assert "Nothing is published" in response.json()["error"]


def test_config_yaml_serves_the_published_agent_with_etag_and_304(
    sample: dict[str, Any], client: Client, publisher_client: Client
) -> None:
    publish(publisher_client)
    set_search_strategy(["neutral"])  # a draft change is not served
    headers = bearer("config:read")
    response = client.get(CONFIG, headers=headers)
    assert response.status_code == 200
    text = response.content.decode()
    digest, body = split_header(text)
    assert digest == hashlib.sha256(body.encode()).hexdigest()
    assert response["ETag"] == f'"{digest}"'
    served = yaml.safe_load(body)
    assert list(served["surfaces"]["as_consumer"]["agents"]) == ["main"]
    assert served["surfaces"]["as_consumer"]["default_agent"] == "main"
    main = served["surfaces"]["as_consumer"]["agents"]["main"]
    assert main["tools"][0]["tool_traits"]["search"] == {"strategy": ["exploration"]}
    assert digest == PolicyVersion.objects.get(number=1).agent_hashes["main"]
    again = client.get(CONFIG, headers={**headers, "If-None-Match": response["ETag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert client.get("/api/v1/agents/ghost/config.yaml", headers=headers).status_code == 404


def test_a_new_version_changes_the_etag(
    sample: dict[str, Any], client: Client, publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    headers = bearer("config:read")
    first = client.get(CONFIG, headers=headers)["ETag"]
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    response = client.get(CONFIG, headers={**headers, "If-None-Match": first})
    assert response.status_code == 200
    assert response["ETag"] != first


# --- rounds link to their version ---------------------------------------------------------------


def round_started(turn: str, at: datetime, policy_hash: str | None) -> None:
    event: dict[str, Any] = {
        "event_id": str(uuid.uuid4()),
        "ts": int(at.timestamp() * 1000),
        "agent": "main",
        "turn_id": turn,
        "iteration": 0,
        "type": "round.started",
        "max_actions": 2,
    }
    if policy_hash is not None:
        event["policy_hash"] = policy_hash
    events_ingest([event])


def test_a_round_links_to_the_version_whose_hash_it_reports(
    sample: dict[str, Any], publisher_client: Client, viewer_client: Client
) -> None:
    publish(publisher_client)
    digest = PolicyVersion.objects.get(number=1).agent_hashes["main"]
    round_started("t-1", timezone.now() + timedelta(seconds=1), digest)
    (listed,) = viewer_client.get("/api/v1/rounds").json()["rounds"]
    assert listed["policy_version"] == 1
    detail = viewer_client.get("/api/v1/rounds/main/t-1/0").json()
    assert detail["policy_version"] == 1
    page = viewer_client.get("/live/rounds/main/t-1/0/").content.decode()
    link = find(page, "dd", class_="policy-version").find("a", href="/policy/versions/1/")
    assert link.text == "version 1"


def test_it_credits_a_round_to_the_version_in_force_when_it_ran(
    sample: dict[str, Any], publisher_client: Client, viewer_client: Client
) -> None:
    """Version 3 is a rollback's copy of version 1 (same hash): the rounds that ran under
    version 1 stay version 1's, and the overview's drift list keeps version 1."""
    publish(publisher_client)
    set_search_strategy(["neutral"])
    publish(publisher_client, "second")
    response = publisher_client.post(
        f"{VERSIONS}/1/rollback", {"message": "back"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    t0 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
    for number, minutes in ((1, 0), (2, 10), (3, 23)):
        PolicyVersion.objects.filter(number=number).update(
            created_at=t0 + timedelta(minutes=minutes)
        )
    digest = PolicyVersion.objects.get(number=1).agent_hashes["main"]
    assert PolicyVersion.objects.get(number=3).agent_hashes["main"] == digest
    round_started("before-any", t0 - timedelta(minutes=1), digest)
    round_started("under-1", t0 + timedelta(minutes=5), digest)
    round_started("late-under-1", t0 + timedelta(minutes=17), digest)  # v2 in force: stale
    round_started("under-3", t0 + timedelta(minutes=30), digest)
    round_started("no-hash", t0 + timedelta(minutes=31), None)
    credited = {
        r["turn_id"]: r["policy_version"]
        for r in viewer_client.get("/api/v1/rounds").json()["rounds"]
    }
    assert credited == {
        "before-any": None,
        "under-1": 1,
        "late-under-1": 1,
        "under-3": 3,
        "no-hash": None,
    }
    assert viewer_client.get("/api/v1/rounds/main/under-1/0").json()["policy_version"] == 1
    page = viewer_client.get("/live/rounds/main/late-under-1/0/").content.decode()
    link = find(page, "dd", class_="policy-version").find("a", href="/policy/versions/1/")
    assert link.text == "version 1"
    Round.objects.update(drift=False)
    overview = rounds_overview(timezone.now())
    assert [number for number, _, _ in overview.drift_by_version] == [3, 1]
    assert {n: checked for n, checked, _ in overview.drift_by_version} == {3: 1, 1: 2}


# --- the policy command -------------------------------------------------------------------------


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("policy", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_imports_and_publishes_a_file(tmp_path: Path) -> None:
    out, _ = run("import", str(SAMPLE), "--publish", "--message", "from git", "--yes")
    assert "published version 1" in out
    version = PolicyVersion.objects.get(number=1)
    assert version.author_name == "cli"
    exported, _ = run("export")
    assert exported.split("\n", 2)[1] == f"# sha256: {version.sha256}"
    assert run("export", "--draft")[0] == exported


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("export",), 1, "nothing is published"),
        (("export", "--version", "7"), 1, "there is no version 7"),
        (("publish", "--message", "x"), 1, "identical"),
        (("import", "missing.yaml"), 2, "cannot read missing.yaml"),
        (("import", str(SAMPLE), "--publish"), 2, "--publish needs --message"),
    ],
)
def test_the_command_exit_codes(args: tuple[str, ...], code: int, needle: str) -> None:
    if args[0] == "publish":
        call_command(
            "policy",
            "import",
            str(SAMPLE),
            "--publish",
            "--message",
            "v",
            "--yes",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert caught.value.returncode == code
    assert needle in str(caught.value)


def test_a_refused_import_changes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("surfaces: [unclosed\n")
    with pytest.raises(CommandError) as caught:
        run("import", str(bad))
    assert caught.value.returncode == 1
    assert draft_state().revision == 0


def test_publish_with_errors_from_the_command_changes_nothing(tmp_path: Path) -> None:
    data = load_policy(SAMPLE.read_bytes()).data
    data["surfaces"]["as_consumer"]["agents"]["main"]["tools"][0]["tool_traits"]["search"] = {
        "strategy": ["bogus"]
    }
    path = tmp_path / "errors.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CommandError) as caught:
        run("import", str(path), "--publish", "--message", "x")
    assert caught.value.returncode == 1
    assert not PolicyVersion.objects.exists()
    assert draft_state().revision == 0


def test_policy_publish_service_is_what_the_command_and_api_share(sample: dict[str, Any]) -> None:
    version = policy_publish(actor="cli", message="m", confirm_warnings=True)
    assert version.number == 1


# --- pages ----------------------------------------------------------------------------------------


def test_the_publish_page_asks_to_confirm_warnings_then_publishes(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    revision = str(draft_state().revision)
    asked = publisher_client.post(
        "/policy/publish/", {"message": "from the page", "base_revision": revision}
    )
    assert asked.status_code == 422
    text = asked.content.decode()
    assert find(text, "form", id="publish-form").find(
        "input", type="checkbox", name="confirm_warnings"
    )
    assert "confirm to publish it anyway" in text_of(text, "p", id="publish-refusal", role="alert")
    done = publisher_client.post(
        "/policy/publish/",
        {"message": "from the page", "base_revision": revision, "confirm_warnings": "on"},
    )
    assert done.status_code == 302
    assert done["Location"] == "/policy/versions/1/"
    page = publisher_client.get("/policy/versions/1/").content.decode()
    assert text_of(page, "dd", class_="version-message") == "from the page"
    assert find(page, "h1").find("span", class_="chip").text == "in force"


def test_the_publish_page_refuses_a_stale_form(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    stale = str(draft_state().revision)
    set_search_strategy(["neutral"])
    response = publisher_client.post(
        "/policy/publish/", {"message": "m", "base_revision": stale, "confirm_warnings": "on"}
    )
    assert response.status_code == 409
    assert_alert(response.content.decode(), "The draft changed since you loaded it")
    assert not PolicyVersion.objects.exists()


def test_the_publish_page_shows_errors_instead_of_the_form(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    set_search_strategy(["bogus"])
    text = publisher_client.get("/policy/publish/").content.decode()
    assert find(text, "section", id="publish-errors")
    assert not find_all(text, "form", id="publish-form")


def test_it_reviews_a_rollback_against_the_version_in_force_and_asks_to_confirm(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    review = publisher_client.get("/policy/versions/1/rollback/").content.decode()
    diff = find(review, "section", class_="diff-block")
    assert diff.find("h2").text == "What changes: version 2 → version 1"
    assert [line.text for line in diff.find("ul", class_="tool-changes").find_all("li")] == [
        "main · workspace_jobs.search: strategy neutral → exploration"
    ]
    assert find(review, "input", type="checkbox", name="confirm_rollback")
    unconfirmed = publisher_client.post("/policy/versions/1/rollback/", {"message": "back"})
    assert unconfirmed.status_code == 422
    assert PolicyVersion.objects.count() == 2
    done = publisher_client.post(
        "/policy/versions/1/rollback/", {"message": "back", "confirm_rollback": "on"}
    )
    assert done.status_code == 302
    assert PolicyVersion.objects.count() == 3


def test_rollback_from_the_page_asks_about_unpublished_changes(
    sample: dict[str, Any], publisher_client: Client
) -> None:
    publish(publisher_client, "one")
    set_search_strategy(["neutral"])
    publish(publisher_client, "two")
    set_search_strategy(["exploitation"])
    asked = publisher_client.post("/policy/versions/1/rollback/", {"message": "back"})
    assert asked.status_code == 422
    assert find(asked.content.decode(), "input", type="checkbox", name="confirm_unpublished")
    done = publisher_client.post(
        "/policy/versions/1/rollback/",
        {"message": "back", "confirm_unpublished": "on", "confirm_rollback": "on"},
    )
    assert done.status_code == 302
    assert done["Location"] == "/policy/versions/3/"
