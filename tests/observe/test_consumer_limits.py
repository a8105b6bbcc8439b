"""The live websocket against misbehaving clients: too many streams for one user, and clients
that send anything at all (the stream is one-way). Others keep their updates."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from observe import consumers
from observe.consumers import TOO_MANY_STREAMS, UNSUPPORTED_DATA, LiveRoundsConsumer
from observe.health import live as health_live
from tests.conftest import make_user
from tests.markup import find_all, page_text
from tests.observe.live_support import HandRound, ingest

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

#: The most a test waits for a message it expects (it returns as soon as the message comes): on a
#: machine whose cores are busy, ingest → group → render → send took over the old 5 s.
TIMEOUT = 30


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> None:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_stream_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Other tests may end without a disconnect (daphne always sends one), and user ids repeat
    # once the database is flushed: count this test's streams only.
    monkeypatch.setattr(consumers, "_open_streams", Counter())


@pytest_asyncio.fixture
async def users() -> tuple[Any, Any]:
    ana = await database_sync_to_async(make_user)("ana", "viewer")
    bo = await database_sync_to_async(make_user)("bo", "viewer")
    return ana, bo


@pytest_asyncio.fixture
async def sockets() -> AsyncIterator[list[WebsocketCommunicator]]:
    opened: list[WebsocketCommunicator] = []
    yield opened
    for communicator in opened:
        await communicator.disconnect(timeout=TIMEOUT)
    assert not consumers._open_streams, "every closed stream gives its slot back"


async def connect(sockets: list[WebsocketCommunicator], user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(LiveRoundsConsumer.as_asgi(), "/ws/live/?since=0")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    sockets.append(communicator)
    return communicator


async def closed_with(communicator: WebsocketCommunicator) -> int:
    output = await communicator.receive_output(timeout=TIMEOUT)
    assert output["type"] == "websocket.close", output
    return int(output["code"])


async def next_round_arrives(communicator: WebsocketCommunicator, turn_id: str) -> None:
    await database_sync_to_async(ingest)(HandRound(turn_id=turn_id).started().events)
    message = await communicator.receive_from(timeout=TIMEOUT)
    assert find_all(message, "article", class_="round-card")


@override_settings(TRAITDECK_MAX_WEBSOCKETS_PER_USER=2)
async def test_a_stream_over_the_users_cap_is_closed_with_4429(
    sockets: list[Any], users: tuple[Any, Any]
) -> None:
    ana, bo = users
    first = await connect(sockets, ana)
    await connect(sockets, ana)
    third = await connect(sockets, ana)
    assert await closed_with(third) == TOO_MANY_STREAMS
    # Another user is not counted against ana's cap.
    theirs = await connect(sockets, bo)
    assert await theirs.receive_nothing(timeout=0.2)
    # A closed stream frees its slot.
    await first.disconnect(timeout=TIMEOUT)
    sockets.remove(first)
    again = await connect(sockets, ana)
    assert await again.receive_nothing(timeout=0.2)
    await next_round_arrives(again, "after-the-cap")


@pytest.mark.parametrize(
    "garbage",
    [
        {"text_data": "{not json"},
        {"text_data": '{"type": "rounds.changed", "first": 1, "version": 99}'},
        {"text_data": "x" * 100_000},
        {"bytes_data": b"\x00\xff\xfe garbage"},
    ],
    ids=["broken-json", "json-posing-as-a-group-message", "large-text", "binary"],
)
async def test_a_client_sending_anything_is_closed_and_others_keep_their_updates(
    sockets: list[Any], users: tuple[Any, Any], garbage: dict[str, Any]
) -> None:
    ana, bo = users
    rogue = await connect(sockets, ana)
    viewer = await connect(sockets, bo)
    await rogue.send_to(**garbage)
    assert await closed_with(rogue) == UNSUPPORTED_DATA
    await next_round_arrives(viewer, "after-the-garbage")
    assert await rogue.receive_nothing(timeout=0.2)


async def test_a_tool_id_with_a_slash_and_its_timeouts_keep_every_stream_open(
    sockets: list[Any], users: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, item 3: 25 timeouts of tool `evil/slash` made the alerts bar raise
    NoReverseMatch in every stream at the next batch (1011 for all)."""
    ana, bo = users
    first, second = await connect(sockets, ana), await connect(sockets, bo)
    hand = HandRound(turn_id="evil").started()
    for index in range(25):
        hand.timeout(index, "evil/slash", None)
    await database_sync_to_async(ingest)(hand.events)
    monkeypatch.setattr(health_live, "_last", None)  # the bar is rendered afresh
    for communicator in (first, second):
        message = await communicator.receive_from(timeout=TIMEOUT)
        assert "evil/slash" in page_text(message)
        # the alerts bar links to the tool's page
        assert [
            link
            for link in find_all(message, "a", href=None)
            if "evil%252Fslash" in link.attrs["href"]
        ]
    await next_round_arrives(first, "after-the-slash")


@override_settings(TRAITDECK_MAX_WEBSOCKETS_PER_USER=2)
async def test_a_stream_that_fails_gives_its_slot_back(
    sockets: list[Any], users: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ana, _ = users
    broken = await connect(sockets, ana)

    async def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a card that cannot be rendered")

    monkeypatch.setattr(consumers, "fragments", fails)
    await database_sync_to_async(ingest)(HandRound(turn_id="breaks").started().events)
    with pytest.raises(RuntimeError):
        await broken.receive_output(timeout=TIMEOUT)  # the consumer died: daphne closes 1011
    sockets.remove(broken)
    assert not consumers._open_streams  # its slot came back
    monkeypatch.undo()
    await connect(sockets, ana)
    again = await connect(sockets, ana)  # both slots free again
    await next_round_arrives(again, "after-the-failure")
