"""The live page, the round page and the history page, as a logged-in viewer gets them."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from observe.domain.kinds import ROUND_KINDS, RoundKind
from observe.models import Round
from observe.selectors import round_url
from policy.services import draft_replace
from tests.conftest import make_user
from tests.markup import assert_element, find
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
    return re.findall(r'<article class="round-card[^"]*" id="(round-\d+)"', page)


def text(page: str) -> str:
    """The page as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())


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
    for kind in ("accepted", "rejected", "early", "dedup", "timeout"):
        assert f'<span class="chip {kind}">' in page, kind
    words = text(page)
    assert "cannot follow it in the same round" in words
    assert re.search(r"started early [\d.]+ s before generation finished", words)
    assert re.search(r"dedup reused tc_[0-9a-f]{12} \(matched by (slot|fingerprint)\)", words)
    assert re.search(r"timeout after [\d.]+ s, limit \d+ s", words)


def test_each_card_carries_its_round_id_version_and_timeline_link(viewer: Client) -> None:
    ingest_simulated(3)
    page = viewer.get("/live/").content.decode()
    for row in Round.objects.all():
        match = re.search(
            rf'<article class="round-card[^"]*" id="round-{row.pk}" data-version="{row.version}">'
            r"(.*?)</article>",
            page,
            re.S,
        )
        assert match, row
        card = match.group(1)
        assert f"{row.turn_id} / {row.iteration}" in card
        assert f'href="{round_url(row)}">Timeline</a>' in card
        assert row.agent in card


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
        assert SCRIPT not in page, path
        assert "<img src=x" not in page, path
        assert "<b onmouseover" not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path
        assert "ag&lt;b onmouseover=alert(3)&gt;" in page, path


def test_it_marks_rounds_of_agents_not_in_the_policy(viewer: Client) -> None:
    ingest(HandRound(agent="ghost").started().events)
    ingest(HandRound(agent="main", turn_id="t-main").started().events)
    page = viewer.get("/live/").content.decode()
    assert page.count("agent not in policy") == 1
    ghost = Round.objects.get(agent="ghost")
    card = page.split(f'id="round-{ghost.pk}"')[1].split("</article>")[0]
    assert "agent not in policy" in card


def test_the_agent_filter_lists_agents_of_the_policy_and_of_rounds(viewer: Client) -> None:
    draft_replace(data=sample_policy(), base_revision=None)
    ingest(HandRound(agent="ghost").started().events)
    page = viewer.get("/live/").content.decode()
    select = page.split('<select name="agent"')[1].split("</select>")[0]
    assert re.findall(r"<option[^>]*>([^<]*)</option>", select) == ["All agents", "ghost", "main"]


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
    assert f'hx-ws:connect="/ws/live/?since={version}&amp;agent=main&amp;has=dedup"' in page
    assert 'data-list-url="/live/?agent=main&amp;has=dedup&amp;partial=rounds"' in page


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
    assert "/static/js/live.js" in page
    assert 'hx-ws:connect="/ws/live/?since=0"' in page


def test_the_list_partial_holds_only_the_cards(viewer: Client) -> None:
    ingest_simulated(3)
    response = viewer.get("/live/?partial=rounds")
    page = response.content.decode()
    assert len(cards(page)) == 3
    assert "<html" not in page
    assert 'id="counters"' not in page
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
        svg = page.split('<svg class="timeline"')[1].split("</svg>")[0]
        assert 'class="lane lane-generation' in svg
        assert re.search(r'class="lane lane-action" data-attempt="\d+" data-index="0"', svg)
        assert f'class="mark {mark}"' in svg, column
        assert 'class="axis"' in svg


@pytest.mark.parametrize("kind", ROUND_KINDS, ids=lambda kind: kind.name)
def test_every_round_kind_has_its_legend_item_and_its_mark_the_same_shape(
    viewer: Client, kind: RoundKind
) -> None:
    ingest_simulated(16)
    page = viewer.get(round_url(round_with(kind.counter))).content.decode()
    legend = page.split('<ul class="legend"')[1].split("</ul>")[0]
    item = re.search(rf'<li data-kind="{kind.name}">(.*?)</li>', legend, re.S)
    assert item is not None, kind.name
    assert unescape(item[1].split("</svg>")[1]).strip() == kind.legend
    key = re.search(rf'<(\w+) class="key-{kind.chip}"([^>]*)>', item[1])
    assert key is not None
    svg = page.split('<svg class="timeline"')[1].split("</svg>")[0]
    mark = re.search(rf'<g class="mark mark-{kind.chip}".*?</g>', svg, re.S)
    assert mark is not None, kind.name
    if 'class="hit"' in mark[0]:  # a point mark: drawn as its legend key is
        assert f'<{key[1]} class="shape"{key[2]}>' in mark[0]


def test_the_marks_tell_the_limit_and_the_reason(viewer: Client) -> None:
    ingest_simulated(16)
    svg = viewer.get(round_url(round_with("timeouts"))).content.decode()
    assert re.search(r'mark-timeout".*?<title>timeout after [\d.]+ s, limit \d+ s', svg, re.S)
    svg = viewer.get(round_url(round_with("rejections"))).content.decode()
    assert re.search(r'mark-rejected".*?<title>rejected: [^<]+</title>', svg, re.S)


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
    assert "workspace_jobs.search" in page
    assert page.count('<li class="event"') == 5
    assert SCRIPT not in page
    assert "&quot;q&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in page


def test_an_unknown_round_is_a_404_page(viewer: Client) -> None:
    assert viewer.get("/live/rounds/main/nope/0/").status_code == 404
    assert viewer.get("/live/rounds/main/nope/not-a-number/").status_code == 404


def test_a_turn_id_holding_slashes_still_resolves(viewer: Client) -> None:
    ingest(HandRound(turn_id="jobs/2026/run-7", iteration=3).started().events)
    row = Round.objects.get()
    assert round_url(row) == "/live/rounds/main/jobs/2026/run-7/3/"
    response = viewer.get(round_url(row))
    assert response.status_code == 200
    assert "jobs/2026/run-7" in response.content.decode()


def test_the_round_page_of_a_round_without_generation_still_draws(viewer: Client) -> None:
    ingest(HandRound().started().call(0, "react.read").events)
    response = viewer.get("/live/rounds/main/turn-hand/0/")
    page = response.content.decode()
    assert response.status_code == 200
    assert 'class="lane lane-generation unfinished"' in page


# --- history ------------------------------------------------------------------------------------


def history_rows(page: str) -> list[str]:
    return re.findall(r'<tr class="history-row" id="history-round-(\d+)"', page)


def test_the_history_lists_newest_first_with_links(viewer: Client) -> None:
    ingest_simulated(4)
    page = viewer.get("/live/history/").content.decode()
    newest_first = list(Round.objects.order_by("-started_at"))
    assert history_rows(page) == [str(row.pk) for row in newest_first]
    for row in newest_first:
        assert f'<a href="{round_url(row)}"' in page


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
    older = re.search(r'<a href="([^"]+)" id="older" rel="next">Older rounds</a>', first)
    assert older
    link = unescape(older.group(1))
    assert "agent=main" in link
    assert f"since={since.replace(':', '%3A')}" in link
    second = viewer.get("/live/history/" + link).content.decode()
    assert len(history_rows(second)) == 2
    assert not set(history_rows(first)) & set(history_rows(second))
    assert 'id="older"' not in second
    assert 'id="newest"' in second


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
