"""Odd identifiers through ingest and editing into every page and the live stream (issue 34, item
3): one runtime event with tool ``evil/slash`` made the Tools page a 500 for everyone and every
live stream close with 1011; an editor got the same 500 with an alias or ``allowed`` name holding
a ``/``.

A hypothesis state machine stores tool ids, turn ids, agent names, aliases and allowed names made
of ``/``, ``%``, ``?``, ``#``, spaces, dots and non-ASCII letters, by ingest and by editing the
draft. After each step every page that shows them answers 2xx, every link those pages carry to a
tool or an agent leads to a 2xx page of that same identifier, and what the live stream sends (the
catch-up's cards and the timeout bar) renders.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from observe.health import live as health_live
from observe.live.stream import catch_up
from observe.selectors import RoundFilter
from observe.services import events_ingest
from policy.selectors import draft_state
from policy.services import EditRefused, draft_change
from tests.hardening.pages import _links, agent_pages, assert_every_page_works, round_pages
from tests.markup import find_all, text_of
from tests.observe.ingest_support import load_sample_into_draft
from tests.observe.live_support import HandRound

pytestmark = pytest.mark.django_db

MACHINES = 3
STEPS = 4
#: The identifiers the probe used, and any short mix of the characters that broke links.
ODD = st.sampled_from(
    [
        "evil/slash",
        "a%2Fb",
        "100%",
        "q?x=1",
        "frag#1",
        "two words",
        "ünï/cødé",
        "..x",
        "a/../b",
        "/",
        "//",
        "%252F",
        "<b>x</b>",
    ]
) | st.text(alphabet=st.sampled_from("/%?#. üa"), min_size=1, max_size=6)
TOOLS_PAGES = ("/live/tools/", "/live/tools/?partial=table", "/live/tools/?partial=alerts")
_ID_LINK = re.compile(r"^/(live/tools|policy/agents)/")


class OddIdentifiers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.client = Client()
        self.client.force_login(_superuser())
        self.turns = 0

    @rule(tool_id=ODD, turn_id=ODD, timeouts=st.integers(min_value=0, max_value=25))
    def ingest_a_round(self, tool_id: str, turn_id: str, timeouts: int) -> None:
        self.turns += 1
        hand = HandRound(turn_id=f"{turn_id}-{self.turns}").started()
        hand.call(0, tool_id)
        for index in range(1, timeouts + 1):
            hand.timeout(index, tool_id, None)
        events_ingest(hand.finished().events, known_agents=frozenset({"main"}))

    @rule(alias=ODD)
    def rename_the_python_alias(self, alias: str) -> None:
        self._edit(lambda main: main["tools"][0].__setitem__("alias", alias))

    @rule(name=ODD)
    def allow_a_tool_name(self, name: str) -> None:
        def edit(main: dict[str, Any]) -> None:
            connection = main["tools"][1]
            connection["allowed"] = [*connection.get("allowed", []), name]
            connection.setdefault("tool_traits", {})[name] = {"strategy": ["exploration"]}

        self._edit(edit)

    @rule(agent=ODD)
    def add_an_agent(self, agent: str) -> None:
        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            agents = doc["surfaces"]["as_consumer"]["agents"]
            agents.setdefault(agent, {"tools": [dict(agents["main"]["tools"][0])]})
            return doc

        with contextlib.suppress(EditRefused):
            draft_change(edit=edit, base_revision=None)

    def _edit(self, change: Any) -> None:
        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            change(doc["surfaces"]["as_consumer"]["agents"]["main"])
            return doc

        with contextlib.suppress(EditRefused):
            draft_change(edit=edit, base_revision=None)

    @invariant()
    def every_page_and_the_stream_work(self) -> None:
        # The pages that show identifiers (each agent's, the tools and live pages, each round).
        pages = ["/", "/policy/", "/live/", "/live/history/", *TOOLS_PAGES]
        pages += [page for agent in draft_state().agents for page in agent_pages(agent)[:3]]
        pages += round_pages()
        followed: list[str] = []
        broken = []
        for page in dict.fromkeys(pages):
            response = self.client.get(page)
            if not 200 <= response.status_code < 300:
                broken.append(f"{page} → {response.status_code}")
            followed += [link for link in _links(response) if _ID_LINK.match(link)]
        for link in dict.fromkeys(followed):
            if link not in pages:
                status = self.client.get(link).status_code
                if not 200 <= status < 300:
                    broken.append(f"{link} → {status}")
        assert not broken, "pages that do not work: " + ", ".join(broken)
        # What a live stream sends: the catch-up's cards and the timeout bar.
        catch_up(RoundFilter(), 0)
        health_live._render()


def _superuser() -> Any:
    from django.contrib.auth import get_user_model

    model = get_user_model()
    user = model.objects.filter(username="odd-ids").first()
    return user or model.objects.create_superuser("odd-ids", password="pw-odd-123")


def test_odd_identifiers_render_on_every_page_and_the_stream() -> None:
    load_sample_into_draft()
    assert draft_state().agents
    run_state_machine_as_test(
        OddIdentifiers,
        settings=settings(
            max_examples=MACHINES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        ),
    )


def test_a_tool_id_with_a_slash_links_to_its_own_page(admin_client: Client) -> None:
    load_sample_into_draft()
    hand = HandRound(turn_id="evil").started()
    for index in range(25):
        hand.timeout(index, "evil/slash", None)
    events_ingest(hand.events, known_agents=frozenset({"main"}))
    for page in TOOLS_PAGES:
        assert admin_client.get(page).status_code == 200, page
    table = admin_client.get("/live/tools/").content.decode()
    links = [link.attrs["href"] for link in find_all(table, "a", href=None)]
    link = next(link for link in links if "evil" in link)
    page = admin_client.get(link)
    assert page.status_code == 200
    assert "evil/slash" in text_of(page.content.decode(), "h1")

    # An editor's names with a `/` (an agent, an alias, an allowed tool): every page and every
    # same-site link they carry works.
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        agents = doc["surfaces"]["as_consumer"]["agents"]
        agents["evil/agent"] = {"tools": [dict(agents["main"]["tools"][0], alias="py/alias")]}
        agents["main"]["tools"][1]["allowed"].append("open/page")
        return doc

    draft_change(edit=edit, base_revision=None)
    assert admin_client.get("/policy/agents/main/").status_code == 200
    assert_every_page_works(admin_client)
