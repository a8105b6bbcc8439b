"""The live rounds websocket, driven with channels' WebsocketCommunicator.

Run in their own pytest process (``-m asyncio``): they need the asyncio loop and a transactional
database, which the Django page tests do not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from observe import live
from observe.consumers import UNAUTHENTICATED, LiveRoundsConsumer
from observe.live import stream
from observe.models import Round
from observe.services import LIVE_GROUP
from observe.services import broadcast_change as real_broadcast
from tests.conftest import make_user
from tests.markup import find, find_all, first_element, page_text, text_of
from tests.observe.live_support import HandRound, ingest, simulated

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

#: The most a test waits for a message it expects (it returns as soon as the message comes): on a
#: machine whose cores are busy, ingest → group → render → send took over the old 5 s.
TIMEOUT = 30


class FastTick(LiveRoundsConsumer):
    tick_seconds = 0.1


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> None:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()


@pytest_asyncio.fixture
async def user() -> Any:
    return await database_sync_to_async(make_user)("ana", "viewer", password="pw-ana-123")


@pytest_asyncio.fixture
async def sockets() -> AsyncIterator[list[WebsocketCommunicator]]:
    opened: list[WebsocketCommunicator] = []
    yield opened
    for communicator in opened:
        await communicator.disconnect(timeout=TIMEOUT)


async def open_socket(
    sockets: list[WebsocketCommunicator],
    user: Any,
    query: str = "since=0",
    consumer: type[LiveRoundsConsumer] = LiveRoundsConsumer,
) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(consumer.as_asgi(), f"/ws/live/?{query}")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    sockets.append(communicator)
    return communicator


async def ingest_async(events: list[dict[str, Any]]) -> None:
    await database_sync_to_async(ingest)(events)


async def round_pk(agent: str, turn_id: str) -> int:
    row = await Round.objects.aget(agent=agent, turn_id=turn_id)
    return row.pk


def seq(message: str) -> int:
    marker = find(message, "span", id="live-seq", hx_swap_oob="true")
    return int(marker.attrs["data-seq"])


def card_ids(message: str) -> list[str]:
    return [card.attrs["id"] for card in find_all(message, "article", class_="round-card")]


def rounds_counted(message: str) -> int:
    """The live bar's round count the message swaps in."""
    return int(text_of(message, "b", id="count-rounds"))


async def test_an_anonymous_socket_is_closed_with_4401() -> None:
    communicator = WebsocketCommunicator(LiveRoundsConsumer.as_asgi(), "/ws/live/?since=0")
    communicator.scope["user"] = AnonymousUser()
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected  # accepted, so the browser sees the close code (htmx does not retry it)
    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": UNAUTHENTICATED,
    }


async def test_it_sends_nothing_when_nothing_changed(sockets: list[Any], user: Any) -> None:
    communicator = await open_socket(sockets, user)
    assert await communicator.receive_nothing(timeout=0.3)


async def test_a_round_ingested_after_connect_arrives_as_a_card_with_seq_1(
    sockets: list[Any], user: Any
) -> None:
    communicator = await open_socket(sockets, user)
    await ingest_async(HandRound(turn_id="t-1").started().call(0, "react.read").events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    pk = await round_pk("main", "t-1")
    envelope = first_element(message)
    assert envelope.matches("hx-partial", {"hx-target": "#incoming", "hx-swap": "beforeend"})
    assert [card.attrs["id"] for card in envelope.find_all("article")] == [f"round-{pk}"]
    assert seq(message) == 1
    counters = find(message, "div", id="counters", class_="counters card")
    assert counters.attrs["hx-swap-oob"] == "true"
    assert counters.find("b", id="count-rounds").text == "1"
    assert find(message, "span", class_="chip accepted").text == "accepted"


async def test_the_stream_renders_the_same_card_as_the_page(sockets: list[Any], user: Any) -> None:
    communicator = await open_socket(sockets, user)
    await ingest_async(next(simulated(1)))
    message = await communicator.receive_from(timeout=TIMEOUT)

    @database_sync_to_async
    def page_card() -> str:
        from django.template.loader import render_to_string

        (card,) = live.cards_for(list(Round.objects.all()))
        return render_to_string("observe/round_card.html#card", {"card": card})

    # The same element, attribute for attribute and word for word (parsed: order-blind).
    card = first_element(await page_card())
    assert find(message, "article", id=card.attrs["id"]) == card


async def test_each_message_takes_the_next_sequence_number(sockets: list[Any], user: Any) -> None:
    communicator = await open_socket(sockets, user)
    numbers = []
    for number in range(3):
        await ingest_async(HandRound(turn_id=f"t-{number}").started().events)
        numbers.append(seq(await communicator.receive_from(timeout=TIMEOUT)))
    assert numbers == [1, 2, 3]


async def test_an_update_of_a_shown_round_is_sent_again_with_its_new_version(
    sockets: list[Any], user: Any
) -> None:
    communicator = await open_socket(sockets, user)
    hand = HandRound(turn_id="t-1").started()
    await ingest_async(hand.events)
    first = await communicator.receive_from(timeout=TIMEOUT)
    hand.events.clear()
    await ingest_async(hand.finished("ok").events)
    second = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(first) == card_ids(second)
    versions = [card_versions(message) for message in (first, second)]
    [card] = card_ids(first)
    assert versions[1][card] > versions[0][card]
    assert text_of(first, "span", class_="chip outcome") == "in progress"
    assert text_of(second, "span", class_="chip outcome ok") == "ok"


async def test_the_agent_filter_keeps_other_agents_out_of_the_stream(
    sockets: list[Any], user: Any
) -> None:
    communicator = await open_socket(sockets, user, "since=0&agent=main")
    await ingest_async(HandRound(agent="other", turn_id="t-other").started().events)
    await ingest_async(HandRound(agent="main", turn_id="t-main").started().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-main')}"]
    assert rounds_counted(message) == 1  # the counters follow the filter too
    assert await communicator.receive_nothing(timeout=0.3)


async def test_the_kind_filter_keeps_rounds_without_that_kind_out(
    sockets: list[Any], user: Any
) -> None:
    communicator = await open_socket(sockets, user, "since=0&has=timeout")
    plain = HandRound(turn_id="t-plain").started().call(0, "react.read")
    await ingest_async(plain.events)
    slow = HandRound(turn_id="t-slow").started().call(0, "jobs.export").generation()
    await ingest_async(slow.timeout(0, "jobs.export", "jobs.launch").events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-slow')}"]
    assert "try jobs.launch" in page_text(message)


async def test_connecting_with_an_old_version_sends_what_changed_since(
    sockets: list[Any], user: Any
) -> None:
    await ingest_async(HandRound(turn_id="t-1").started().events)
    await ingest_async(HandRound(turn_id="t-2").started().events)
    first = await Round.objects.aget(turn_id="t-1")
    communicator = await open_socket(sockets, user, f"since={first.version}")
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-2')}"]
    assert seq(message) == 1


async def test_a_dropped_group_message_is_healed_by_the_tick(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    communicator = await open_socket(sockets, user, consumer=FastTick)
    # The layer drops the notification (as the in-memory layer does when a queue is full).
    monkeypatch.setattr("observe.services.broadcast_change", lambda version: None)
    await ingest_async(HandRound(turn_id="t-lost").started().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-lost')}"]
    assert seq(message) == 1
    # Later ticks do not send it again.
    assert await communicator.receive_nothing(timeout=0.4)


def card_versions(message: str) -> dict[str, int]:
    return {
        card.attrs["id"]: int(card.attrs["data-version"])
        for card in find_all(message, "article", class_="round-card")
    }


async def latest_versions() -> dict[str, int]:
    return {f"round-{row.pk}": row.version async for row in Round.objects.all()}


async def test_a_viewer_far_behind_gets_every_change_in_several_messages_not_a_reload(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "MAX_CARDS", 2)
    for number in range(3):
        await ingest_async(HandRound(turn_id=f"t-{number}").started().events)
    communicator = await open_socket(sockets, user, "since=0")
    first = await communicator.receive_from(timeout=TIMEOUT)
    second = await communicator.receive_from(timeout=TIMEOUT)
    # Oldest change first, at most MAX_CARDS cards a message, nothing left out.
    shown = [f"round-{await round_pk('main', f't-{number}')}" for number in range(3)]
    assert card_ids(first) + card_ids(second) == shown
    assert (seq(first), seq(second)) == (1, 2)
    for message in (first, second):
        assert not find_all(message, data_caught_up=None)
        assert not find_all(message, data_resync=None)
    assert rounds_counted(second) == 3
    # The stream goes on from the newest version: the next change is sent normally.
    await ingest_async(HandRound(turn_id="t-next").started().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-next')}"]
    assert seq(message) == 3
    assert rounds_counted(message) == 4


async def test_a_viewer_that_falls_behind_loses_no_update(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sequence-checked: while the layer drops a viewer's messages (more rounds change than a
    message holds, one of them twice), it later gets every round at its latest version, in
    messages numbered without a gap, and its counters agree with the database."""
    monkeypatch.setattr(stream, "MAX_CARDS", 3)
    communicator = await open_socket(sockets, user)
    await ingest_async(HandRound(turn_id="t-before").started().events)
    received = [await communicator.receive_from(timeout=TIMEOUT)]
    sent: list[Any] = []
    monkeypatch.setattr("observe.services.broadcast_change", sent.append)
    again = HandRound(turn_id="t-again").started()
    await ingest_async(again.events)
    for number in range(7):
        await ingest_async(HandRound(turn_id=f"t-dropped-{number}").started().events)
    await ingest_async(again.generation().events)  # a later version of a round already changed
    monkeypatch.setattr("observe.services.broadcast_change", real_broadcast)
    await ingest_async(HandRound(turn_id="t-after").started().events)  # shows the gap
    wanted = await latest_versions()
    shown = card_versions(received[0])
    while any(shown.get(card, 0) < version for card, version in wanted.items()):
        received.append(await communicator.receive_from(timeout=TIMEOUT))
        for card, version in card_versions(received[-1]).items():
            shown[card] = max(shown.get(card, 0), version)
    assert shown == wanted  # every round, at its latest version (the first version coalesced)
    assert [seq(message) for message in received] == list(range(1, len(received) + 1))
    assert all(len(card_ids(message)) <= 3 for message in received)
    assert not any(find_all(message, data_caught_up=None) for message in received)
    assert rounds_counted(received[-1]) == len(wanted)


async def test_a_viewer_further_behind_than_a_catch_up_holds_is_told_what_was_left_out(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "CATCH_UP_MAX", 2)
    for number in range(3):
        await ingest_async(HandRound(turn_id=f"t-{number}").started().events)
    communicator = await open_socket(sockets, user, "since=0")
    message = await communicator.receive_from(timeout=TIMEOUT)
    newest = [f"round-{await round_pk('main', f't-{number}')}" for number in (1, 2)]
    assert card_ids(message) == newest
    marker = find(message, "span", id="live-seq")
    assert (marker.attrs["data-seq"], marker.attrs["data-caught-up"]) == ("1", "1")
    assert rounds_counted(message) == 3


async def test_a_missing_batch_is_caught_up_when_the_next_one_shows_the_gap(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    communicator = await open_socket(sockets, user)
    sent = []
    monkeypatch.setattr("observe.services.broadcast_change", sent.append)
    await ingest_async(HandRound(turn_id="t-lost").started().events)
    monkeypatch.undo()
    await ingest_async(HandRound(turn_id="t-next").started().events)
    await ingest_async(HandRound(turn_id="t-last").started().events)
    wanted = {f"round-{await round_pk('main', t)}" for t in ("t-lost", "t-next", "t-last")}
    received: list[str] = []
    while not wanted <= {card for message in received for card in card_ids(message)}:
        received.append(await communicator.receive_from(timeout=TIMEOUT))
    assert rounds_counted(received[-1]) == 3
    assert [seq(message) for message in received] == list(range(1, len(received) + 1))


async def test_a_channel_layer_that_is_away_at_connect_is_joined_on_a_later_tick(
    sockets: list[Any], user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis restarting (its groups gone, the first call failing) must not fail the handshake:
    the stream opens, reads the database each tick, and joins the group once the layer answers."""
    layer = channel_layers["default"]
    real_group_add = layer.group_add
    failures: list[str] = []

    async def away_once(group: str, channel: str) -> None:
        if not failures:
            failures.append(group)
            raise ConnectionError("Connection refused")
        await real_group_add(group, channel)

    monkeypatch.setattr(layer, "group_add", away_once)
    communicator = await open_socket(sockets, user, consumer=FastTick)
    assert failures == [LIVE_GROUP]
    await ingest_async(HandRound(turn_id="t-away").started().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert card_ids(message) == [f"round-{await round_pk('main', 't-away')}"]
    if hasattr(layer, "groups"):  # the in-memory layer shows its members; Redis does not
        assert len(layer.groups[LIVE_GROUP]) == 1


async def test_a_round_that_drifts_counts_on_the_live_bar_and_shows_its_chip(
    sockets: list[Any], user: Any
) -> None:
    """A runtime claiming the published sample but starting an early call that the sample does
    not let start early: the stream's card says drift and the bar counts it."""

    def publish_sample() -> str:
        from policy.domain.yaml_io import load_policy
        from policy.services import draft_replace
        from policy.versions import agent_hashes, policy_publish
        from tests.observe.live_support import SAMPLE, sample_policy

        draft_replace(data=load_policy(SAMPLE.read_bytes()).data, base_revision=None)
        policy_publish(actor="cli", message="sample", confirm_warnings=True)
        return agent_hashes(sample_policy())["main"]

    policy_hash = await database_sync_to_async(publish_sample)()
    communicator = await open_socket(sockets, user)
    # It runs after the publish: a round is credited to the version in force when it started.
    hand = HandRound(turn_id="t-drift", start=timezone.now()).started(policy_hash)
    hand.call(0, "workspace_jobs.search")
    hand.add(
        "tool.early_started",
        action_index=0,
        tool_id="workspace_jobs.search",
        tool_call_id="tc_000000000001",
        fingerprint="a" * 64,
    )
    await ingest_async(hand.generation().finished().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    while not [count for count in find_all(message, "b", id="count-drift") if count.text == "1"]:
        message = await communicator.receive_from(timeout=TIMEOUT)
    note = find(message, "p", class_="drift-note")
    assert note.find("span", class_="chip drift").text == "drift"
    assert "the runtime started workspace_jobs.search early" in note.text
