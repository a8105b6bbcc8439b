"""The live page, the round page and the history page, as a logged-in viewer gets them."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from core.vocabulary import ROUND_KINDS, RoundKind
from observe.models import Round
from observe.selectors import round_url
from policy.services import draft_replace
from tests.conftest import make_user
from tests.markup import Element, assert_element, find, find_all, is_fragment, page_text, text_of
from tests.observe.live_support import HandRound, ingest, ingest_simulated, sample_policy

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def viewer(client: Client) -> Client:
    make_user("ana", "viewer", password="pw-ana-123")
    client.login(username="ana", password="pw-ana-123")
    return client


def cards(page: str) -> list[str]:
    """The ids of the round cards, in page order."""
    return [card.attrs["id"] for card in find_all(page, "article", class_="round-card")]


def card_of(page: str, row: Round) -> Element:
    return find(page, "article", class_="round-card", id=f"round-{row.pk}")


def text(page: str) -> str:
    """The page as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    return page_text(page)


def fact_kinds(page: str) -> set[str]:
    """The kinds of the fact chips on the cards (accepted, early, dedup, …)."""
    chips = [fact.find("span", class_="chip") for fact in find_all(page, "span", class_="fact")]
    return {kind for chip in chips for kind in chip.classes - {"chip"}}


# --- login --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/live/", "/live/history/", "/live/rounds/main/turn-1/0/", "/live/?partial=rounds"]
)
def test_it_sends_anonymous_visitors_to_the_login_page(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


# --- the live page ------------------------------------------------------------------------------


def test_the_live_page_shows_a_chip_of_every_kind_from_simulated_rounds(viewer: Client) -> None:
    ingest_simulated(16)
    page = viewer.get("/live/").content.decode()
    assert {"accepted", "rejected", "early", "dedup", "timeout"} <= fact_kinds(page)
    words = text(page)
    assert "cannot follow it in the same round" in words
    assert re.search(r"started early [\d.]+ s before generation finished", words)
    assert re.search(r"dedup reused tc_[0-9a-f]{12} \(matched by (slot|fingerprint)\)", words)
    assert re.search(r"timeout after [\d.]+ s, limit \d+ s", words)


def test_each_card_carries_its_round_id_version_and_timeline_link(viewer: Client) -> None:
    ingest_simulated(3)
    page = viewer.get("/live/").content.decode()
    for row in Round.objects.all():
        card = card_of(page, row)
        assert card.attrs["data-version"] == str(row.version)
        assert card.find("span", class_="turn").text == f"{row.turn_id} / {row.iteration}"
        assert card.find("a", class_="timeline-link", href=round_url(row)).text == "Timeline"
        assert row.agent in card.text


def test_a_timeout_names_its_limit_and_the_async_alternative(viewer: Client) -> None:
    ingest(
        HandRound()
        .started()
        .call(0, "workspace_jobs.export_report", strategy="exploitation")
        .generation()
        .timeout(0, "workspace_jobs.export_report", "workspace_jobs.launch_background_job")
        .finished("failed")
        .events
    )
    words = text(viewer.get("/live/").content.decode())
    assert "timeout after 2.012 s, limit 2 s try workspace_jobs.launch_background_job" in words


def test_it_shows_newest_rounds_first(viewer: Client) -> None:
    ingest_simulated(5)
    page = viewer.get("/live/").content.decode()
    newest_first = Round.objects.order_by("-started_at")
    assert cards(page) == [f"round-{row.pk}" for row in newest_first]


def test_it_shows_at_most_200_rounds(viewer: Client) -> None:
    start = timezone.now() - timedelta(hours=1)
    ingest(
        [
            event
            for number in range(203)
            for event in HandRound(turn_id=f"t-{number}", start=start + timedelta(seconds=number))
            .started()
            .events
        ]
    )
    shown = cards(viewer.get("/live/").content.decode())
    assert len(shown) == 200
    oldest_three = Round.objects.order_by("started_at")[:3]
    assert not {f"round-{row.pk}" for row in oldest_three} & set(shown)


def test_tool_ids_params_and_agents_holding_html_render_as_text(viewer: Client) -> None:
    ingest(
        HandRound(agent="ag<b onmouseover=alert(3)>")
        .started()
        .call(0, f"tool{SCRIPT}", params={"q": '<img src=x onerror="alert(2)">'})
        .events
    )
    for path in ("/live/", "/live/?partial=rounds", "/live/history/"):
        page = viewer.get(path).content.decode()
        # No element came out of the data: no script running alert, no img, no b with a handler.
        assert not [s for s in find_all(page, "script") if "alert(1)" in s.text], path
        assert not find_all(page, "img", src="x"), path
        assert not find_all(page, "b", onmouseover=None), path
        # A reader sees the text as it was sent.
        words = text(page)
        assert f"tool{SCRIPT}" in words, path
        assert "ag<b onmouseover=alert(3)>" in words, path


def test_it_marks_rounds_of_agents_not_in_the_policy(viewer: Client) -> None:
    ingest(HandRound(agent="ghost").started().events)
    ingest(HandRound(agent="main", turn_id="t-main").started().events)
    page = viewer.get("/live/").content.decode()
    badges = find_all(page, "span", class_="not-in-policy")
    assert [badge.text for badge in badges] == ["agent not in policy"]
    ghost = Round.objects.get(agent="ghost")
    assert card_of(page, ghost).find("span", class_="not-in-policy").text == "agent not in policy"


def test_the_agent_filter_lists_agents_of_the_policy_and_of_rounds(viewer: Client) -> None:
    draft_replace(data=sample_policy(), base_revision=None)
    ingest(HandRound(agent="ghost").started().events)
    page = viewer.get("/live/").content.decode()
    options = find(page, "select", name="agent").find_all("option")
    assert [option.text for option in options] == ["All agents", "ghost", "main"]


def test_the_filter_form_has_the_four_kinds_and_apply(viewer: Client) -> None:
    page = viewer.get("/live/?has=dedup").content.decode()
    for kind, label in [
        ("rejection", "rejections"),
        ("early", "early starts"),
        ("dedup", "dedups"),
        ("timeout", "timeouts"),
    ]:
        box = find(page, "input", name="has", value=kind)
        assert ("checked" in box.attrs) == (kind == "dedup"), kind
        assert_element(page, "label", label, class_="check")
    assert_element(page, "button", "Apply", type="submit")


def test_the_filter_applies_to_the_list_the_counters_and_the_stream(viewer: Client) -> None:
    ingest_simulated(16)
    ingest(HandRound(agent="other").started().events)
    response = viewer.get("/live/?agent=main&has=dedup")
    page = response.content.decode()
    with_dedups = Round.objects.filter(agent="main", dedups__gt=0)
    assert set(cards(page)) == {f"round-{row.pk}" for row in with_dedups}
    assert find(page, "b", id="count-rounds").text == str(with_dedups.count())
    version = max(Round.objects.values_list("version", flat=True))
    live = find(page, "div", id="live")
    assert live.attrs["hx-ws:connect"] == f"/ws/live/?since={version}&agent=main&has=dedup"
    assert live.attrs["data-list-url"] == "/live/?agent=main&has=dedup&partial=rounds"


def test_the_counters_total_the_rounds_and_count_the_last_minute(viewer: Client) -> None:
    ingest_simulated(16)  # ten minutes ago
    ingest_simulated(2, start=timezone.now() - timedelta(seconds=20), seed=8)
    page = viewer.get("/live/").content.decode()
    rows = Round.objects.all()
    recent = rows.filter(started_at__gte=timezone.now() - timedelta(seconds=60))
    assert find(page, "b", id="count-rounds").text == str(rows.count())
    assert find(page, "span", id="rate-rounds").text == str(recent.count())
    totals = {
        "rejections": sum(r.rejections for r in rows),
        "early": sum(r.early_starts for r in rows),
        "dedups": sum(r.dedups for r in rows),
        "timeouts": sum(r.timeouts for r in rows),
    }
    for name, total in totals.items():
        assert find(page, "b", id=f"count-{name}").text == str(total), name
    assert find(page, "span", id="rate-rejections").text == str(sum(r.rejections for r in recent))


def test_the_page_has_the_stream_controls(viewer: Client) -> None:
    page = viewer.get("/live/").content.decode()
    assert_element(page, "button", "Pause", type="button", id="pause")
    assert_element(page, id="pending-count")
    assert_element(page, id="stream-status")
    assert find(page, "div", id="incoming", hidden=None).text == ""
    assert_element(page, id="live-seq")
    scripts = [script.attrs.get("src", "") for script in find_all(page, "script")]
    assert [src for src in scripts if src.startswith("/static/js/live.")]
    assert find(page, "div", id="live").attrs["hx-ws:connect"] == "/ws/live/?since=0"


def test_the_list_partial_holds_only_the_cards(viewer: Client) -> None:
    ingest_simulated(3)
    response = viewer.get("/live/?partial=rounds")
    page = response.content.decode()
    assert len(cards(page)) == 3
    assert is_fragment(page)
    assert not find_all(page, id="counters")
    assert response["X-Live-Version"] == str(max(Round.objects.values_list("version", flat=True)))


# --- the round page -----------------------------------------------------------------------------


def round_with(kind_column: str) -> Round:
    row = Round.objects.filter(**{f"{kind_column}__gt": 0}).first()
    assert row is not None, kind_column
    return row


def test_the_round_page_draws_lanes_and_marks_of_every_kind(viewer: Client) -> None:
    ingest_simulated(16)
    marks = {
        "rejections": "mark-rejected",
        "early_starts": "mark-early",
        "dedups": "mark-dedup",
        "timeouts": "mark-timeout",
    }
    for column, mark in marks.items():
        row = round_with(column)
        response = viewer.get(round_url(row))
        assert response.status_code == 200
        page = response.content.decode()
        svg = find(page, "svg", class_="timeline")
        assert svg.find_all("g", class_="lane lane-generation")
        assert svg.find_all("g", class_="lane lane-action", data_attempt=None, data_index="0")
        assert svg.find_all("g", class_=f"mark {mark}"), column
        assert svg.find("g", class_="axis")


@pytest.mark.parametrize("kind", ROUND_KINDS, ids=lambda kind: kind.name)
def test_every_round_kind_has_its_legend_item_and_its_mark_the_same_shape(
    viewer: Client, kind: RoundKind
) -> None:
    ingest_simulated(16)
    page = viewer.get(round_url(round_with(kind.counter))).content.decode()
    item = find(page, "ul", class_="legend").find("li", data_kind=kind.name)
    assert item.text == kind.legend
    key = item.find(class_=f"key-{kind.chip}")
    marks = find(page, "svg", class_="timeline").find_all("g", class_=f"mark mark-{kind.chip}")
    assert marks, kind.name
    for mark in marks:
        if mark.find_all(class_="hit"):  # a point mark: drawn as its legend key is
            shape = mark.find(class_="shape")
            assert shape.tag == key.tag
            assert without_class(shape.attrs) == without_class(key.attrs)


def without_class(attrs: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in attrs.items() if name != "class"}


def test_the_marks_tell_the_limit_and_the_reason(viewer: Client) -> None:
    ingest_simulated(16)
    page = viewer.get(round_url(round_with("timeouts"))).content.decode()
    titles = [mark.find("title").text for mark in find_all(page, "g", class_="mark-timeout")]
    assert any(re.match(r"timeout after [\d.]+ s, limit \d+ s", title) for title in titles)
    page = viewer.get(round_url(round_with("rejections"))).content.decode()
    titles = [mark.find("title").text for mark in find_all(page, "g", class_="mark-rejected")]
    assert titles
    assert all(re.fullmatch(r"rejected: .+", title) for title in titles)


def test_the_round_page_shows_the_header_actions_and_events(viewer: Client) -> None:
    ingest(
        HandRound(turn_id="turn-9", iteration=2)
        .started(policy_hash="ab" * 32)
        .call(0, "workspace_jobs.search", params={"q": SCRIPT})
        .generation()
        .finished()
        .events
    )
    page = viewer.get("/live/rounds/main/turn-9/2/").content.decode()
    words = text(page)
    assert "Policy hash in force " + "ab" * 32 in words
    assert "Outcome ok" in words
    assert "workspace_jobs.search" in words
    events = find_all(page, "li", class_="event")
    assert len(events) == 5
    assert not [s for s in find_all(page, "script") if "alert(1)" in s.text]
    assert '"q": "<script>alert(1)</script>"' in " ".join(event.text for event in events)


def test_an_unknown_round_is_a_404_page(viewer: Client) -> None:
    assert viewer.get("/live/rounds/main/nope/0/").status_code == 404
    assert viewer.get("/live/rounds/main/nope/not-a-number/").status_code == 404


def test_a_turn_id_holding_slashes_still_resolves(viewer: Client) -> None:
    ingest(HandRound(turn_id="jobs/2026/run-7", iteration=3).started().events)
    row = Round.objects.get()
    assert round_url(row) == "/live/rounds/main/jobs/2026/run-7/3/"
    response = viewer.get(round_url(row))
    assert response.status_code == 200
    assert "jobs/2026/run-7" in text(response.content.decode())


def test_the_round_page_of_a_round_without_generation_still_draws(viewer: Client) -> None:
    ingest(HandRound().started().call(0, "react.read").events)
    response = viewer.get("/live/rounds/main/turn-hand/0/")
    page = response.content.decode()
    assert response.status_code == 200
    assert find(page, "svg", class_="timeline").find("g", class_="lane-generation unfinished")


# --- history ------------------------------------------------------------------------------------


def history_rows(page: str) -> list[str]:
    rows = find_all(page, "tr", class_="history-row")
    return [row.attrs["id"].removeprefix("history-round-") for row in rows]


def test_the_history_lists_newest_first_with_links(viewer: Client) -> None:
    ingest_simulated(4)
    page = viewer.get("/live/history/").content.decode()
    newest_first = list(Round.objects.order_by("-started_at"))
    assert history_rows(page) == [str(row.pk) for row in newest_first]
    for row in newest_first:
        assert find(page, "tr", id=f"history-round-{row.pk}").find_all("a", href=round_url(row))


def test_the_history_rows_list_the_tools_of_rounds_of_several_days(viewer: Client) -> None:
    """Each row's tools are read from its round's day (its partition on PostgreSQL)."""
    now = timezone.now()
    for n, tool in enumerate(("web.search", "files.read", "react.write")):
        hand = HandRound(turn_id=f"day-{n}", start=now - timedelta(days=n, minutes=5))
        ingest(hand.started().call(0, tool).call(1, f"{tool}.more").events)
    page = viewer.get("/live/history/").content.decode()
    for n, tool in enumerate(("web.search", "files.read", "react.write")):
        row = Round.objects.get(turn_id=f"day-{n}")
        cell = find(page, "tr", id=f"history-round-{row.pk}").find("td", class_="tools")
        assert [code.text for code in cell.find_all("code")] == [tool, f"{tool}.more"]


def test_the_history_pages_back_with_older_rounds(viewer: Client) -> None:
    start = timezone.now() - timedelta(hours=2)
    for number in range(53):
        ingest(
            HandRound(turn_id=f"t-{number}", start=start + timedelta(minutes=number))
            .started()
            .events
        )
    # One round (the oldest) starts before ``since``: the second page must keep the filter.
    since = (start + timedelta(seconds=30)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    first = viewer.get(f"/live/history/?agent=main&since={since}").content.decode()
    assert len(history_rows(first)) == 50
    older = find(first, "a", id="older", rel="next")
    assert older.text == "Older rounds"
    link = older.attrs["href"]
    assert "agent=main" in link
    assert f"since={since.replace(':', '%3A')}" in link
    second = viewer.get("/live/history/" + link).content.decode()
    assert len(history_rows(second)) == 2
    assert not set(history_rows(first)) & set(history_rows(second))
    assert not find_all(second, id="older")
    assert find(second, "a", id="newest")


def test_the_history_filters_by_agent_kind_tool_and_time(viewer: Client) -> None:
    ingest_simulated(16)
    ingest(HandRound(agent="other", turn_id="t-x").started().call(0, "react.rg").events)
    rows = Round.objects.all()

    def shown(query: str) -> set[str]:
        return set(history_rows(viewer.get("/live/history/?" + query).content.decode()))

    assert shown("agent=other") == {str(rows.get(agent="other").pk)}
    both = rows.filter(rejections__gt=0, timeouts__gt=0)
    assert shown("has=rejection&has=timeout") == {str(r.pk) for r in both}
    assert shown("tool=react.rg") == {
        str(r.pk) for r in rows.filter(tools__tool_id="react.rg").distinct()
    }
    middle = sorted(rows, key=lambda r: r.started_at)[5].started_at.astimezone(UTC)
    since = (middle - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert shown(f"since={since}&agent=main") == {
        str(r.pk) for r in rows.filter(agent="main", started_at__gte=middle)
    }
    until = (middle + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert shown(f"until={until}&agent=main") == {
        str(r.pk) for r in rows.filter(agent="main", started_at__lte=middle)
    }


def test_the_history_says_when_a_time_or_cursor_is_not_one(viewer: Client) -> None:
    ingest_simulated(2)
    response = viewer.get("/live/history/?since=yesterday")
    assert response.status_code == 200
    assert "is not a time" in text(response.content.decode())
    response = viewer.get("/live/history/?before=!!nope")
    assert response.status_code == 400
    assert len(history_rows(response.content.decode())) == 2


def test_the_history_form_keeps_the_search(viewer: Client) -> None:
    page = viewer.get(
        "/live/history/?agent=main&has=early&tool=react.read&since=2026-01-02T03:04"
    ).content.decode()
    assert "checked" in find(page, "input", name="has", value="early").attrs
    assert_element(page, "input", value="react.read")
    assert_element(page, "input", name="since", id="history-since", value="2026-01-02T03:04")


def test_the_round_page_shows_the_react_agent_the_bridge_inferred_from_v2_envelopes(
    viewer: Client, settings: Any
) -> None:
    """The v2 turn whose protocol retries ran out, mapped by the bridge from the envelopes v2's
    own decision node published: its rounds say v2 although the setting says v3, and the last
    one is the turn's failure."""
    import json

    from conformance import fixtures
    from kdcube.bridge.domain.mapping import Mapper

    settings.TRAITDECK_REACT_AGENT_VERSION = "v3"
    case = next(
        c
        for c in fixtures.read("kdcube-envelopes-v2")["cases"]
        if c["id"] == "v2-retries-exhausted"
    )
    mapper, events = Mapper({"main"}), []
    for message in case["published"]:
        events += mapper.feed_message(message["channel"], json.dumps(message["payload"])).events
    ingest(events)
    for iteration in (0, 2):
        page = viewer.get(f"/live/rounds/main/v2-turn-d/{iteration}/").content.decode()
        assert " ".join(text_of(page, "dd", id="round-react").split()) == (
            "v2 (from the bridge's inference from the envelopes)"
        )
    assert "action_schema_error validation failed." in page_text(page)


def test_the_round_page_says_whether_the_code_channel_streamed_complete(viewer: Client) -> None:
    """Issue 37 §5: the exec rounds of the recorded v3 envelopes, mapped by the bridge; the
    runtime judged the code channel complete with a contract and non-blank code only."""
    import json

    from conformance import fixtures
    from kdcube.bridge.domain.mapping import Mapper

    cases = {c["id"]: c for c in fixtures.read("kdcube-envelopes")["cases"]}
    mapper, events = Mapper({"main"}), []
    for case_id in ("exec-code-complete", "exec-code-without-contract", "exec-code-blank"):
        for message in cases[case_id]["published"]:
            payload = json.dumps(message["payload"])
            events += mapper.feed_message(message["channel"], payload).events
    ingest(events)

    def shown(iteration: int) -> str:
        page = viewer.get(f"/live/rounds/main/turn-h/{iteration}/").content.decode()
        return " ".join(text_of(page, "dd", id="round-code").split())

    assert cases["exec-code-complete"]["input"]["round"]["exec_code_complete"] is True
    assert shown(0).startswith("streamed complete (exec_code_complete: true, reported by")
    for iteration in (1, 2):
        assert shown(iteration).startswith("incomplete (exec_code_complete: false, reported by")
    ingest(HandRound(turn_id="turn-q", iteration=0).started().events)
    page = viewer.get("/live/rounds/main/turn-q/0/").content.decode()
    assert text_of(page, "dd", id="round-code").strip().startswith("not reported: drift and")


def test_the_round_page_shows_the_mode_and_react_agent_the_round_ran_with(
    viewer: Client, settings: Any
) -> None:
    settings.TRAITDECK_REACT_AGENT_VERSION = "v3"
    reported = HandRound(turn_id="turn-m", iteration=0).add(
        "round.started",
        after_ms=0,
        max_actions=2,
        multi_action_mode=" Fanout ",
        react_version="V2",
    )
    ingest(reported.call(0, "workspace_jobs.search").generation().finished().events)
    page = viewer.get("/live/rounds/main/turn-m/0/").content.decode()
    mode = " ".join(text_of(page, "dd", id="round-mode").split())
    assert mode == "Fanout (reported by round.started; the runtime reads it as on)"
    assert " ".join(text_of(page, "dd", id="round-react").split()) == (
        "v2 (from round.started's report)"
    )
    ingest(HandRound(turn_id="turn-n", iteration=0).started().events)
    page = viewer.get("/live/rounds/main/turn-n/0/").content.decode()
    assert text_of(page, "dd", id="round-mode").strip() == "not reported"
    assert "v3 (from the setting TRAITDECK_REACT_AGENT_VERSION)" in " ".join(
        text_of(page, "dd", id="round-react").split()
    )
