"""The push guard's baseline (issue 33): what Traitdeck pushed or took in with an applied import.
Reads by the listener, the poll, previews and dry runs never move it; refusals and drift name the
trait; pushes to one bundle are serialized; KDCube's own admin widget's writes (recorded from its
routes with the props shapes @kdcube/components-react's agentic-config writes) are understood."""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEntry
from kdcube import services as kdcube
from kdcube.models import KDCubeBundle, KDCubePush, KDCubeRead
from policy.selectors import draft_state
from policy.services import draft_replace
from policy.versions import policy_publish
from tests.kdcube.kdcube_replay import ReplayServer
from tests.kdcube.test_push import VERSION
from tests.markup import find, text_of, texts

pytestmark = pytest.mark.django_db
TRAIT = "`main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"


@pytest.fixture
def version() -> int:
    draft_replace(data=VERSION, base_revision=None, user="test")
    return policy_publish(actor="test", message="v", confirm_warnings=True).number


def pushed(server: ReplayServer) -> None:
    server.expect("push-read", "push-write", "push-read-back")
    assert kdcube.kdcube_push(actor="test", overwrite=True).status == "pushed"


def state() -> tuple[int, int, int, list[Any]]:
    return (
        KDCubeRead.objects.count(),
        AuditEntry.objects.count(),
        KDCubePush.objects.count(),
        list(KDCubeBundle.objects.values()),
    )


def test_the_listeners_read_does_not_clear_an_outside_change(
    server: ReplayServer, version: int
) -> None:
    pushed(server)
    server.expect("drift-read")
    assert kdcube.kdcube_observe(source="listener", updated_by="ops-admin").outside_change
    server.expect("drift-read")
    row = kdcube.kdcube_push(actor="test")
    assert row.status == "refused"
    assert TRAIT in row.answer
    assert f"push version {version} again" in row.answer
    assert server.served[-2:] == ["drift-read", "drift-read"]  # nothing written
    # The poll's read does not clear it either.
    server.expect("drift-read", "drift-read")
    kdcube.kdcube_observe(source="poll")
    assert kdcube.kdcube_push(actor="test").status == "refused"


@pytest.mark.parametrize("how", ["page", "api-dry-run", "command"])
def test_a_preview_or_dry_run_stores_nothing_and_moves_no_baseline(
    server: ReplayServer, version: int, viewer_client: Any, publisher_client: Any, how: str
) -> None:
    from django.core.management import call_command

    pushed(server)
    before = state()
    server.expect("drift-read")
    if how == "page":
        page = viewer_client.get("/policy/kdcube/import/")
        assert page.status_code == 200
        assert find(page.content.decode(), "input", name="kdcube_read").value
    elif how == "api-dry-run":
        answer = publisher_client.post("/api/v1/kdcube/pull")
        assert answer.json()["applied"] is False
    else:
        call_command("policy", "pull")
    assert state() == before  # a GET, a preview, a dry run: nothing stored
    server.expect("drift-read")
    row = kdcube.kdcube_push(actor="test")
    assert row.status == "refused"
    assert TRAIT in row.answer


def test_applying_the_import_page_makes_its_read_the_baseline(
    server: ReplayServer, version: int, publisher_client: Any
) -> None:
    server.expect("push-read")
    page = publisher_client.get("/policy/kdcube/import/").content.decode()
    token = find(page, "input", name="kdcube_read").value
    text = find(page, "textarea", name="text", hidden=None).value
    assert token
    assert text
    assert kdcube.baseline() is None
    form = {"op": "apply", "kdcube_read": token, "text": text}

    def apply(**changed: str) -> int:
        revision = str(draft_state().revision)
        answer = publisher_client.post(
            "/policy/import/", {**form, "base_revision": revision, **changed}
        )
        return int(answer.status_code)

    # A forged read, or one carried with another text, is not taken in (the draft is applied).
    assert apply(kdcube_read=token[:-2]) == 302
    assert kdcube.baseline() is None
    assert apply(text=form["text"] + "# another text\n") == 302
    assert kdcube.baseline() is None
    assert apply() == 302
    taken = kdcube.baseline()
    assert taken is not None
    assert taken.baseline_source == "import"
    # Nothing of the secret KDCube answered resolved is kept.
    assert "resolved-knowledge-secret" not in str(taken.baseline)
    # The push compares with what was taken in: unchanged, so it writes.
    server.expect("push-read", "push-write", "push-read-back")
    assert kdcube.kdcube_push(actor="test", number=version).status == "pushed"
    assert kdcube.baseline().baseline_source == "push"  # type: ignore[union-attr]


def test_the_api_pull_applied_takes_the_read_in(
    server: ReplayServer, version: int, publisher_client: Any
) -> None:
    server.expect("push-read")
    answer = publisher_client.post("/api/v1/kdcube/pull?dry_run=false").json()
    assert answer["applied"] is True
    assert kdcube.baseline().baseline_source == "import"  # type: ignore[union-attr]


def test_drift_is_named_down_to_the_trait_in_the_api_pages_and_audit(
    server: ReplayServer, version: int, publisher_client: Any
) -> None:
    pushed(server)
    server.expect("drift-read")
    kdcube.kdcube_observe(source="listener", updated_by="ops-admin")
    drift = publisher_client.get("/api/v1/kdcube").json()["config_drift"]
    assert drift["changes"] == [
        {
            "path": "`main` → connection `web` → `web_search`: strategy",
            "before": "[exploration]",
            "after": "[exploitation]",
            "text": TRAIT,
        }
    ]
    assert drift["lines"] == [TRAIT]
    assert "(reported by KDCube as `ops-admin`)" in drift["sentence"]
    for url in ("/", "/policy/versions/"):
        page = publisher_client.get(url).content.decode()
        assert TRAIT in text_of(page, "section", id="config-drift")
    entry = AuditEntry.objects.get(action="kdcube.outside-change")
    assert TRAIT in entry.message
    assert entry.after["changes"] == drift["changes"]


def test_a_stale_widget_save_of_the_tools_list_is_named_once_and_pushed_again(
    server: ReplayServer, version: int, publisher_client: Any
) -> None:
    # Traitdeck pushes; an admin then saves "Tools & traits" in KDCube's widget from an editor
    # opened before that push: the whole tools list as it was (merge replaces lists).
    server.expect("widget-push-read", "widget-push-write", "widget-push-read-back")
    assert kdcube.kdcube_push(actor="test", overwrite=True).status == "pushed"
    server.expect("widget-stale-read")
    kdcube.kdcube_observe(source="listener", updated_by="ops-admin")
    drift = publisher_client.get("/api/v1/kdcube").json()["config_drift"]
    head = f"the tools of `main` were replaced: 2 traits of version {version} are gone"
    assert drift["lines"][0] == head
    assert sum("were replaced" in line for line in drift["lines"]) == 1
    assert (
        "`main` → connection `web` → `web_fetch`: strategy [exploration, exploitation] → "
        "[exploration]" in drift["lines"]
    )
    assert "`main` → connection `knowledge` → `search_docs`: traits removed" in drift["lines"]
    drift_card = find(publisher_client.get("/").content.decode(), "section", id="config-drift")
    assert [line.text for line in drift_card.find_all("li")][0] == head
    assert drift_card.find("button", type="submit").text == f"Push version {version} again"
    server.expect("widget-stale-read")
    refused = kdcube.kdcube_push(actor="test")
    assert refused.status == "refused"
    assert head in refused.answer
    # One click: "Push version N again" overwrites on purpose.
    server.expect("widget-stale-read", "widget-push-again-write", "widget-push-again-read-back")
    answer = publisher_client.post(f"/policy/versions/{version}/push/", {"overwrite": "on"})
    assert answer.status_code == 302
    assert KDCubePush.objects.first().status == "pushed"  # type: ignore[union-attr]
    assert publisher_client.get("/api/v1/kdcube").json()["config_drift"] is None


def test_the_widgets_multi_action_switch_is_a_key_inert_warning(
    server: ReplayServer, version: int, publisher_client: Any
) -> None:
    key = "react.agents.main.multi_action_mode"
    server.expect("widget-multi-action-read")
    kdcube.kdcube_observe(source="listener", updated_by="ops-admin")
    assert publisher_client.get("/api/v1/kdcube").json()["inert"] == [key]
    [warning] = texts(publisher_client.get("/").content.decode(), "p", class_="kdcube-inert")
    assert warning.startswith(f"key-inert KDCube's props hold {key}")
    server.expect("widget-multi-action-read")
    preview = publisher_client.post("/api/v1/kdcube/pull").json()
    inert = [d for d in preview["diagnostics"] if d["code"] == "key-inert"]
    assert [d["path"] for d in inert] == [key]
    assert inert[0]["severity"] == "warning"
    assert f"the runtime ignores {key}".lower() in inert[0]["message"].lower()
    assert "AI_REACT_AGENT_MULTI_ACTION" in inert[0]["hint"]
    server.expect("widget-multi-action-read")
    page = publisher_client.get("/policy/kdcube/import/").content.decode()
    [warning] = texts(page, "p", class_="kdcube-inert")
    assert warning.startswith(f"key-inert The runtime ignores {key}")


def test_the_import_of_props_with_the_widgets_keys_warns_key_inert(publisher_client: Any) -> None:
    text = (
        "surfaces:\n  as_consumer:\n    agents:\n      main:\n        tools: []\n"
        "react:\n  main:\n    multi_action_mode: 'on'\n"
        "  agents:\n    main:\n      multi_action_mode: 'on'\n"
    )
    answer = publisher_client.post("/api/v1/policy/validate", text, content_type="application/yaml")
    codes = [(d["code"], d["path"]) for d in answer.json()["diagnostics"]]
    assert ("key-inert", "react.main.multi_action_mode") in codes
    assert ("key-inert", "react.agents.main.multi_action_mode") in codes


# Two pushes at once: tests/kdcube/bridge/test_kdcube_guard.py (two processes on a SQLite file).
