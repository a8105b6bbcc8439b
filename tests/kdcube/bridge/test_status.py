"""The bridge's heartbeat: ``POST /api/v1/bridge/status`` and the overview line it feeds."""

from __future__ import annotations

import math
import re
import time
from typing import Any

import pytest
from django.test import Client

from accounts.tokens import runtime_token_create
from tests.markup import Element, find, find_all, page_text, text_of

pytestmark = pytest.mark.django_db


def post(client: Client, secret: str, body: Any) -> Any:
    return client.post(
        "/api/v1/bridge/status",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_a_report_is_stored_and_the_overview_says_how_long_ago_the_last_envelope_came(
    viewer_client: Client,
) -> None:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    now_ms = int(time.time() * 1000)
    counts = {
        "envelopes": 42,
        "mapped": 30,
        "inferred": 70,
        "skipped": 12,
        "reasons": {"decision delta of a round already started": 12},
    }
    answer = post(
        Client(), secret, {"name": "kdcube", "last_envelope_ms": now_ms - 3000, "counts": counts}
    )
    assert answer.status_code == 200
    assert isinstance(answer.json()["agents"], list)
    page = viewer_client.get("/").content.decode()
    # 3 s, plus however long the post and the page took (seconds on a busy machine).
    took_s = time.time() - now_ms / 1000
    bridge = find(page, "section", id="bridges").find("li")
    assert bridge.find("strong").text == "bridge kdcube"
    shown = re.search(r"last envelope (\d+) s ago", bridge.text)
    assert shown, bridge.text
    assert 3 <= int(shown.group(1)) <= 3 + math.ceil(took_s)
    assert "· 42 envelopes, 30 mapped, 70 inferred events, 12 skipped" in bridge.text
    assert not bridge.find_all(class_="dropped")


def test_the_overview_says_when_the_bridge_dropped_rounds(viewer_client: Client) -> None:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    counts = {"envelopes": 9, "dropped_rounds": 3, "dropped_events": 40}
    assert post(Client(), secret, {"name": "kdcube", "counts": counts}).status_code == 200
    page = viewer_client.get("/").content.decode()
    assert text_of(page, "span", class_="chip dropped") == "3 rounds dropped (40 events)"


def test_a_bad_report_is_refused_with_a_reason_and_a_token_is_needed() -> None:
    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    reader = runtime_token_create(name="reader", scopes=["events:read"]).secret
    bad = post(Client(), secret, {"name": "", "counts": {}})
    assert bad.status_code == 422
    assert "name" in bad.json()["error"]
    assert post(Client(), secret, {"name": "k", "counts": {"mapped": -1}}).status_code == 422
    # A NUL is valid JSON but no PostgreSQL column holds it: refused on every database.
    nul = post(Client(), secret, {"name": "k\x00", "counts": {}})
    assert nul.status_code == 422
    assert "NUL" in nul.json()["error"]
    reason = {"name": "k", "counts": {"reasons": {"a\x00b": 1}}}
    assert post(Client(), secret, reason).status_code == 422
    assert post(Client(), reader, {"name": "k"}).status_code == 403
    assert post(Client(), "nope", {"name": "k"}).status_code == 401


def event_heads(page: str) -> list[Element]:
    """The head line of each event on the round page."""
    return find_all(page, "summary", class_="event-head")


def test_the_round_page_says_which_events_were_inferred(viewer_client: Client) -> None:
    import json as _json

    from conformance import fixtures
    from kdcube.bridge.domain.mapping import Mapper
    from tests.observe.ingest_support import post_events

    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    mapper = Mapper({"main"})
    events = []
    for case in fixtures.read("kdcube-envelopes")["cases"][:2]:
        for message in case["published"]:
            channel, payload = message["channel"], _json.dumps(message["payload"])
            events.extend(mapper.feed_message(channel, payload).events)
    answer = post_events(Client(), events, secret)
    assert answer.status_code == 200
    assert answer.json()["rejected"] == []
    page = viewer_client.get("/live/rounds/main/turn-a/1/").content.decode()
    assert "inferred from the runtime's tool events" in page_text(page)
    # One chip on each event the bridge inferred (in the events list).
    chips = [event.find_all("span", class_="chip inferred") for event in event_heads(page)]
    assert sum(len(found) for found in chips) == sum(
        1 for e in events if e["iteration"] == 1 and e.get("inferred")
    )
    assert {chip.text for found in chips for chip in found} == {"inferred"}


@pytest.mark.parametrize(
    ("case_id", "iteration", "words"),
    [
        ("restream-moves-early-slot", 2, "Re-stream: the decision step puts workspace_jobs.search"),
        ("protocol-rejected-single", 1, "Action 0: the runtime's rejection carries no index"),
        ("final-answer-rejected", 0, "The rejected action is 'complete'"),
    ],
)
def test_the_round_page_says_in_words_what_the_bridge_inferred(
    viewer_client: Client, case_id: str, iteration: int, words: str
) -> None:
    import json as _json

    from conformance import fixtures
    from kdcube.bridge.domain.mapping import Mapper
    from tests.observe.ingest_support import post_events

    secret = runtime_token_create(name="bridge", scopes=["events:write"]).secret
    mapper = Mapper({"main"})
    events = []
    case = next(c for c in fixtures.read("kdcube-envelopes")["cases"] if c["id"] == case_id)
    for message in case["published"]:
        channel, payload = message["channel"], _json.dumps(message["payload"])
        events.extend(mapper.feed_message(channel, payload).events)
    assert post_events(Client(), events, secret).json()["rejected"] == []
    page = viewer_client.get(f"/live/rounds/main/turn-c/{iteration}/").content.decode()
    assert "What the bridge inferred" in page_text(page)
    assert words in page_text(page)
