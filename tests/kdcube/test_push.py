"""Publishing to KDCube: push, pull and config drift, against a server that answers only what
KDCube's own admin props routes answered when recorded."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEntry
from kdcube import services as kdcube
from kdcube.models import KDCubePush
from policy.models import PolicyVersion
from policy.services import draft_replace
from policy.versions import policy_publish, version_published
from tests.kdcube.kdcube_replay import ReplayServer, exchange

pytestmark = pytest.mark.django_db
VERSION: dict[str, Any] = exchange("push-read-back")["traitdeck"]["version"]
SECRET_PATH = "mcp.services.mcpServers.knowledge.headers.X-Api-Key"


def publish(django_capture_on_commit_callbacks: Any, data: Any = None) -> PolicyVersion:
    draft_replace(data=data or VERSION, base_revision=None, user="test")
    with django_capture_on_commit_callbacks(execute=True):
        return policy_publish(actor="test", message="v", confirm_warnings=True)


def test_it_changes_nothing_without_a_target(django_capture_on_commit_callbacks: Any) -> None:
    publish(django_capture_on_commit_callbacks)
    assert not KDCubePush.objects.exists()
    assert kdcube.config_drift() is None


def test_it_publishes_into_kdcube_after_a_pull_and_sees_an_outside_change(
    server: ReplayServer, django_capture_on_commit_callbacks: Any
) -> None:
    # Import from KDCube first: the secret KDCube answers resolved is not imported.
    server.expect("push-read")
    pulled = kdcube.kdcube_pull()
    assert pulled.secrets == [SECRET_PATH]
    assert "resolved-knowledge-secret" not in pulled.text
    assert "secret, not imported" in pulled.text
    # Applied: its read is what the push compares KDCube's props with.
    assert kdcube.kdcube_take_in(pulled.read)

    # Publish: the push re-reads, writes the owned subtree only, reads back, compares.
    server.expect("push-read", "push-write", "push-read-back")
    version = publish(django_capture_on_commit_callbacks)
    row = KDCubePush.objects.get()
    assert (row.version, row.status, row.answer) == (version.number, "pushed", "")
    assert row.subtree_hash == kdcube.version_hash(version)
    assert server.served[-3:] == ["push-read", "push-write", "push-read-back"]
    assert kdcube.config_drift() is None

    # An admin changes one trait in KDCube; the listener reads it: config drift.
    server.expect("drift-read")
    seen = kdcube.kdcube_observe(source="listener", updated_by="ops-admin")
    assert seen.outside_change
    drift = kdcube.config_drift()
    assert drift is not None
    assert drift.differs == ["agents.main"]
    sentence = kdcube.config_drift_sentence(drift)
    assert sentence is not None
    assert (
        "(reported by KDCube as `ops-admin`): `main` → connection `web` → `web_search`: "
        "strategy [exploration] → [exploitation]" in sentence
    )
    entry = AuditEntry.objects.get(action="kdcube.outside-change")
    assert entry.after["differs"] == ["agents.main"]
    assert entry.after["changes"] == drift.changes
    assert entry.after["reported_by"] == "ops-admin"
    assert entry.actor_name == "kdcube"

    # Import as draft: the changed trait comes in, the reference stays a reference.
    server.expect("drift-read")
    again = kdcube.kdcube_pull()
    assert again.secrets == []
    assert "env:TD_REC_KNOWLEDGE_KEY" in again.text
    assert "- exploitation" in again.text


def test_it_refuses_the_first_push_over_props_it_never_read(server: ReplayServer) -> None:
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect("push-read")
    row = kdcube.kdcube_push(actor="test")
    assert row.status == "refused"
    assert "never wrote or took in" in row.answer
    assert server.served == ["push-read"]  # nothing written


def test_it_overwrites_when_asked(server: ReplayServer) -> None:
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect("push-read", "push-write", "push-read-back")
    assert kdcube.kdcube_push(actor="test", overwrite=True).status == "pushed"


def test_it_refuses_when_the_subtree_changed_between_read_and_write(
    server: ReplayServer,
) -> None:
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect("push-read", "push-write", "push-read-back")
    assert kdcube.kdcube_push(actor="test", overwrite=True).status == "pushed"
    # Someone writes in KDCube after Traitdeck's last read; the push's re-read sees it.
    server.expect("drift-read")
    row = kdcube.kdcube_push(actor="test")
    assert row.status == "refused"
    assert "changed in KDCube since Traitdeck pushed them" in row.answer
    assert (
        "`main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"
        in row.answer
    )
    assert server.served[-1] == "drift-read"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("500", "KDCube failed (500)"),
        ("slow", "did not answer within 1 s"),
        ("drop", "unreachable"),
    ],
)
def test_a_failed_push_keeps_the_version_and_says_why(
    server: ReplayServer, fault: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fault == "slow":
        monkeypatch.setenv("TRAITDECK_KDCUBE_TIMEOUT_S", "1")  # and the answer takes 3 s
        server.slow_s = 3
    draft_replace(data=VERSION, base_revision=None, user="test")
    version = policy_publish(actor="test", message="v", confirm_warnings=True)
    server.fault = fault
    row = kdcube.kdcube_push(actor="test", overwrite=True)
    assert row.status == "failed"
    assert words in row.answer
    assert version_published() == version
    assert AuditEntry.objects.filter(action="kdcube.push.failed").count() == 1


def test_an_expired_token_is_named(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAITDECK_KDCUBE_TOKEN", "")
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect("get-without-token")
    row = kdcube.kdcube_push(actor="test")
    assert row.status == "failed"
    assert "may have expired" in row.answer
    entries = AuditEntry.objects.filter(action__startswith="kdcube.")
    assert all("td-rec" not in (e.message + str(e.after)) for e in entries)


def test_the_commands_push_and_pull(server: ReplayServer, capsys: Any) -> None:
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect("push-read")
    call_command("policy", "pull")
    out = capsys.readouterr()
    assert "preview only" in out.out
    assert kdcube.baseline() is None  # a preview takes nothing in
    server.expect("push-read")
    call_command("policy", "pull", "--yes")
    server.expect("push-read", "push-write", "push-read-back")
    call_command("policy", "push", "--version", "1")
    assert "pushed version 1" in capsys.readouterr().out
    with pytest.raises(CommandError) as err:
        call_command("policy", "push", "--version", "9")
    assert err.value.returncode == 1


def test_a_rollback_pushes_the_copy(
    server: ReplayServer, django_capture_on_commit_callbacks: Any
) -> None:
    from policy.versions import policy_rollback

    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v1", confirm_warnings=True)
    other = {"surfaces": {"as_consumer": {"agents": {"main": {"tools": []}}}}}
    draft_replace(data=other, base_revision=None, user="test")
    policy_publish(actor="test", message="v2", confirm_warnings=True)
    server.expect("push-read")
    kdcube.kdcube_take_in(kdcube.kdcube_pull().read)
    server.expect("push-read", "push-write", "push-read-back")
    with django_capture_on_commit_callbacks(execute=True):
        copy = policy_rollback(actor="test", number=1, message="back")
    row = KDCubePush.objects.get()
    assert (row.version, row.status) == (copy.number, "pushed")


def test_the_pull_command_applies_with_yes(server: ReplayServer, capsys: Any) -> None:
    from policy.selectors import draft_state

    server.expect("push-read")
    call_command("policy", "pull", "--yes")
    captured = capsys.readouterr()
    assert "imported from KDCube into the draft" in captured.out
    assert f"{SECRET_PATH}: secret, not imported" in captured.err
    tools = draft_state().data["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
    assert "rendering" in [t["name"] for t in tools]


def test_it_keeps_the_recent_reads_only(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdcube.models import KDCubeRead

    monkeypatch.setattr(kdcube, "KEEP_READS", 2)
    draft_replace(data=VERSION, base_revision=None, user="test")
    policy_publish(actor="test", message="v", confirm_warnings=True)
    server.expect_always("drift-read")
    for _ in range(4):
        kdcube.kdcube_observe(source="poll")
    assert KDCubeRead.objects.count() == 2
    assert AuditEntry.objects.filter(action="kdcube.outside-change").count() == 1


def test_the_commands_say_when_no_target_is_configured() -> None:
    for action in ("push", "pull"):
        with pytest.raises(CommandError) as err:
            call_command("policy", action)
        assert err.value.returncode == 2
        assert "No KDCube target is configured" in str(err.value)
