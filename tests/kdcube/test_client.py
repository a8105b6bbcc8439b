"""The KDCube connector against a server answering from KDCube's recorded admin props routes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from kdcube import client as kdcube_client
from kdcube.domain import props as kdcube_props
from tests.kdcube import kdcube_replay
from tests.kdcube.kdcube_replay import ReplayServer, exchange

TENANT, PROJECT, BUNDLE = "acme", "demo", "workspace@2026-03-31-13-36"
ADMIN = "td-rec-super-admin"


@pytest.fixture
def kdcube() -> Iterator[ReplayServer]:
    yield from kdcube_replay.serve()


def target(server: ReplayServer, **changes: Any) -> kdcube_client.Target:
    # A generous limit (the server runs on a thread of this busy process); the time-limit test
    # sets its own.
    base = kdcube_client.Target(
        url=server.url, tenant=TENANT, project=PROJECT, bundle=BUNDLE, token=ADMIN, timeout_s=30
    )
    return replace(base, **changes)


def test_it_reads_props_and_code_defaults(kdcube: ReplayServer) -> None:
    kdcube.expect("push-read")
    body = kdcube_client.props_read(target(kdcube))
    assert body["props"]["surfaces"]["as_consumer"]["agents"]["main"]["tools"]
    assert "role_models" in body["defaults"]


def test_it_writes_exactly_the_recorded_merge_of_the_owned_subtree(kdcube: ReplayServer) -> None:
    read = exchange("push-read")["response"]["json"]
    version = exchange("push-read-back")["traitdeck"]["version"]
    patch = kdcube_props.push_patch(
        kdcube_props.Target(props=read["props"], defaults=read["defaults"]), version
    )
    kdcube.expect("push-write")
    answer = kdcube_client.props_merge(target(kdcube), patch)
    assert answer["status"] == "ok"
    # Only the owned subtree is sent: nothing KDCube resolved outside it goes back.
    assert list(patch) == ["surfaces"]
    assert list(patch["surfaces"]) == ["as_consumer"]


@pytest.mark.parametrize(
    ("case", "changes", "kind", "words"),
    [
        ("get-without-token", {"token": ""}, "auth", "expired"),
        ("get-invalid-token", {"token": "not-a-token"}, "auth", "Invalid token"),
        ("get-not-super-admin", {"token": "td-rec-registered-user"}, "auth", "super-admin"),
        ("get-unknown-bundle", {"bundle": "nope@1"}, "not-found", "nope@1 not found"),
    ],
)
def test_it_names_what_kdcube_refused(
    kdcube: ReplayServer, case: str, changes: dict[str, Any], kind: str, words: str
) -> None:
    kdcube.expect(case)
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(target(kdcube, **changes))
    assert err.value.kind == kind
    assert words in str(err.value)


def test_it_reports_a_bundle_not_in_the_active_descriptor(kdcube: ReplayServer) -> None:
    kdcube.expect("post-bundle-not-in-descriptor")
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_merge(target(kdcube, bundle="nope@1"), {"x": 1})
    assert err.value.kind == "refused"
    assert err.value.status == 400
    assert "not present in the active descriptor" in str(err.value)


def test_it_reports_a_server_failure(kdcube: ReplayServer) -> None:
    kdcube.fault = "502"
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(target(kdcube))
    assert (err.value.kind, err.value.status) == ("server", 502)


def test_it_gives_up_on_an_answer_slower_than_the_time_limit(kdcube: ReplayServer) -> None:
    kdcube.fault = "slow"
    kdcube.slow_s = 1.0
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(target(kdcube, timeout_s=0.2))
    assert err.value.kind == "timeout"
    assert "0.2 s" in str(err.value)


def test_it_reports_kdcube_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = kdcube_client.Target(
        url=f"http://127.0.0.1:{port}", tenant=TENANT, project=PROJECT, bundle=BUNDLE, token=ADMIN
    )
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(closed)
    assert err.value.kind == "unreachable"


def test_it_reports_a_dropped_connection(kdcube: ReplayServer) -> None:
    kdcube.fault = "drop"
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(target(kdcube))
    assert err.value.kind == "unreachable"


def test_it_never_shows_the_token(kdcube: ReplayServer, tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("td-rec-registered-user\n")
    t = target(kdcube, token="", token_file=str(token_file))
    assert "td-rec" not in repr(t)
    assert "td-rec" not in t.label
    kdcube.expect("get-not-super-admin")
    with pytest.raises(kdcube_client.KDCubeError) as err:
        kdcube_client.props_read(t)
    assert "td-rec" not in str(err.value)


def test_it_reads_the_token_file_on_each_use(tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    t = kdcube_client.Target(
        url="u", tenant="t", project="p", bundle="b", token_file=str(token_file)
    )
    assert t.bearer() == "first"
    token_file.write_text("rotated")
    assert t.bearer() == "rotated"


def test_it_is_off_without_all_four_names() -> None:
    env = {
        "TRAITDECK_KDCUBE_URL": "http://kdcube:8000/",
        "TRAITDECK_KDCUBE_TENANT": "acme",
        "TRAITDECK_KDCUBE_PROJECT": "demo",
    }
    assert kdcube_client.target_from_env(env) is None
    full = kdcube_client.target_from_env({**env, "TRAITDECK_KDCUBE_BUNDLE": BUNDLE})
    assert full is not None
    assert full.url == "http://kdcube:8000"
