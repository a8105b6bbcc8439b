"""The live page's timeout bar: on the page, and kept current by the stream (no reload)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from observe.consumers import LiveRoundsConsumer
from observe.health import live as health_live
from observe.services import events_ingest
from tests.conftest import make_user
from tests.markup import Element, find_all
from tests.observe.health.test_api import finished, timed_out

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

#: The most a test waits for a message it expects (it returns as soon as the message comes): on a
#: machine whose cores are busy, ingest → group → render → send took over the old 5 s.
TIMEOUT = 30


@pytest.fixture(autouse=True)
def fresh() -> None:
    channel_layers.backends.clear()
    health_live._last = None  # no render from another test


@pytest_asyncio.fixture
async def socket() -> AsyncIterator[WebsocketCommunicator]:
    user = await database_sync_to_async(make_user)("ana", "viewer", password="pw-ana-123")
    communicator = WebsocketCommunicator(LiveRoundsConsumer.as_asgi(), "/ws/live/?since=0")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    yield communicator
    await communicator.disconnect(timeout=TIMEOUT)


async def next_bar(communicator: WebsocketCommunicator) -> Element:
    """The timeout bar swapped in by the next message that carries one."""
    for _ in range(20):
        message: Any = await communicator.receive_from(timeout=TIMEOUT)
        if found := find_all(str(message), "div", id="tool-alerts"):
            return found[0]
    raise AssertionError("no message with the timeout bar")


async def test_it_names_a_tool_whose_timeout_rate_crossed_the_threshold(
    socket: WebsocketCommunicator,
) -> None:
    at = datetime.now(UTC) - timedelta(minutes=2)
    tool = "workspace_jobs.search"
    events = [finished(tool, f"s{i}", 30.0, at=at) for i in range(6)]
    events += [timed_out(tool, f"x{i}", 2000, at=at) for i in range(3)]
    await database_sync_to_async(events_ingest)(events)
    bar = await next_bar(socket)
    assert bar.attrs["hx-swap-oob"] == "true"
    assert bar.find("a", data_tool=tool).text == f"{tool} 33.3 % of 9 calls"


async def test_it_leaves_a_tool_under_the_threshold_out(socket: WebsocketCommunicator) -> None:
    at = datetime.now(UTC) - timedelta(minutes=2)
    events = [finished("workspace_jobs.search", f"s{i}", 30.0, at=at) for i in range(30)]
    events += [timed_out("workspace_jobs.search", "x0", 2000, at=at)]
    await database_sync_to_async(events_ingest)(events)
    bar = await next_bar(socket)
    assert not bar.find_all(data_tool=None)
