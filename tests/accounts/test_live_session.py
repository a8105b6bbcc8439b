"""The live stream ends with the session: logout, expiry or a role taken away close it within
a few seconds, with a close code the page explains (4401 log in again, 4403 no role)."""

from __future__ import annotations

from typing import Any

import pytest
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client

from accounts.roles import role_set
from observe.consumers import FORBIDDEN, UNAUTHENTICATED, LiveRoundsConsumer
from tests.conftest import make_user

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

#: The most a test waits for a message it expects (it returns as soon as the message comes): on a
#: machine whose cores are busy, a session check → close took over the old 5 s.
TIMEOUT = 30


class QuickCheck(LiveRoundsConsumer):
    session_check_seconds = 0.2


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> None:
    channel_layers.backends.clear()


def _logged_in(role: str | None) -> tuple[Any, Client, str]:
    user = make_user(f"live-{role}", role)
    client = Client()
    client.force_login(user)
    return user, client, client.cookies[settings.SESSION_COOKIE_NAME].value


async def open_socket(session_key: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        AuthMiddlewareStack(QuickCheck.as_asgi()),
        "/ws/live/?since=0",
        headers=[(b"cookie", f"{settings.SESSION_COOKIE_NAME}={session_key}".encode())],
    )
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def test_the_stream_closes_with_4401_after_logout() -> None:
    _, client, key = await database_sync_to_async(_logged_in)("viewer")
    socket = await open_socket(key)
    assert await socket.receive_nothing(timeout=0.5)  # streaming, nothing to say yet
    await database_sync_to_async(client.post)("/accounts/logout/")
    assert await socket.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": UNAUTHENTICATED,
    }


async def test_the_stream_closes_with_4401_when_the_session_expires() -> None:
    _, _, key = await database_sync_to_async(_logged_in)("viewer")
    socket = await open_socket(key)

    def expire() -> None:
        store = SessionStore(key)
        store.load()
        store.set_expiry(-1)
        store.save()

    await database_sync_to_async(expire)()
    assert (await socket.receive_output(timeout=TIMEOUT))["code"] == UNAUTHENTICATED


async def test_the_stream_closes_with_4403_when_the_role_is_taken_away() -> None:
    user, _, key = await database_sync_to_async(_logged_in)("viewer")
    socket = await open_socket(key)
    await database_sync_to_async(role_set)(user, None)
    assert (await socket.receive_output(timeout=TIMEOUT))["code"] == FORBIDDEN


async def test_a_user_without_a_role_is_closed_at_once_with_4403() -> None:
    _, _, key = await database_sync_to_async(_logged_in)(None)
    socket = await open_socket(key)
    assert await socket.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": FORBIDDEN,
    }
