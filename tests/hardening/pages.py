"""Every page and read API route that shows stored data, and a check that each one answers.

A value that was accepted and stored must never break a page later: after a repro or a fuzz
example, the tests call :func:`assert_every_page_works` (every page, plus every same-site link those
pages carry) or, where hundreds of examples run, :func:`assert_pages_work` over the pages that show
the data the example wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlsplit

from django.test import Client

from observe.models import Round
from observe.selectors import round_ids_in_path, round_url
from policy.models import PolicyVersion
from policy.selectors import agent_url, draft_state
from tests.markup import parse

#: Pages that exist whatever is stored (DESIGN §5: overview, policy, live, history, audit, tokens).
FIXED_PAGES = (
    "/",
    "/policy/",
    "/policy/import/",
    "/policy/publish/",
    "/policy/versions/",
    "/policy/diff/",
    "/policy/export.yaml",
    "/live/",
    "/live/history/",
    "/audit/",
    "/audit/export.csv",
    "/tokens/",
)
FIXED_API = (
    "/api/v1/health",
    "/api/v1/whoami",
    "/api/v1/agents",
    "/api/v1/rounds",
    "/api/v1/rounds?limit=500",
    "/api/v1/policy/export.yaml",
    "/api/v1/versions",
    "/api/v1/audit",
    "/api/openapi.json",
)
#: Links the crawl does not follow: they leave the session or are Django's own admin.
NOT_FOLLOWED = ("/accounts/logout/", "/admin/", "/static/")
#: The attributes that carry a link a user (or htmx for them) follows.
_LINK_ATTRIBUTES = ("href", "hx-get")


def _segment(text: str) -> str:
    return quote(text, safe="")


def agent_pages(agent: str) -> list[str]:
    """The pages and API reads of one agent of the draft; none for a name no URL can hold (the
    agents page lists it without a link, DESIGN §6)."""
    base = agent_url(agent)
    if base is None:
        return []
    pages = [base, f"{base}effective/", f"{base}catalog/", f"{base}playground/", f"{base}manifest/"]
    if "/" in agent or agent in {".", ".."}:
        # The pages take any name (web.converters); the API's {agent} is one plain segment.
        return pages
    api = f"/api/v1/agents/{_segment(agent)}"
    return [
        *pages,
        f"{api}/effective",
        f"{api}/catalog",
        f"{api}/catalog?format=text",
        f"{api}/connections",
    ]


def policy_pages() -> list[str]:
    """Every page that shows the draft or a version: the lists, each agent's pages, each version."""
    pages = ["/", "/policy/", "/policy/export.yaml", "/policy/diff/", "/policy/versions/"]
    pages += ["/api/v1/agents", "/api/v1/policy/export.yaml", "/api/v1/versions"]
    for agent in draft_state().agents:
        pages += agent_pages(agent)
    for number in PolicyVersion.objects.values_list("number", flat=True):
        pages += [f"/policy/versions/{number}/", f"/api/v1/versions/{number}"]
        pages.append(f"/api/v1/versions/{number}/export.yaml")
    return pages


def round_pages(rounds: Iterable[Round] | None = None) -> list[str]:
    """The round page and API detail of each round (all stored rounds by default)."""
    pages = []
    for row in Round.objects.all() if rounds is None else rounds:
        url = round_url(row)
        if url:
            pages.append(url)
        if round_ids_in_path(row.agent, row.turn_id):
            # The API's one-round path takes the same ids as the page's path; others (stored
            # before ingest refused them) are read through the rounds list and their page.
            turn = quote(row.turn_id, safe="/")
            pages.append(f"/api/v1/rounds/{_segment(row.agent)}/{turn}/{row.iteration}")
    return pages


def event_pages() -> list[str]:
    """Every page that shows rounds: the overview, live, history, the rounds API, each round."""
    pages = ["/", "/live/", "/live/history/", "/api/v1/rounds", "/api/v1/rounds?limit=500"]
    return pages + round_pages()


def assert_pages_work(client: Client, pages: Iterable[str]) -> None:
    """GET each page: every one answers 2xx."""
    broken = []
    for page in dict.fromkeys(pages):
        response = client.get(page)
        if not 200 <= response.status_code < 300:
            broken.append(f"{page} → {response.status_code}")
    assert not broken, "pages that do not work: " + ", ".join(broken)


def _links(response: Any) -> list[str]:
    if not response.get("Content-Type", "").startswith("text/html"):
        return []
    found = []
    links = [
        element.attrs[name]
        for element in parse(response.content.decode())
        for name in _LINK_ATTRIBUTES
        if name in element.attrs
    ]
    for link in links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            continue
        if parts.path.startswith(NOT_FOLLOWED):
            continue
        found.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return found


def assert_every_page_works(client: Client, *, crawl_limit: int = 400) -> int:
    """GET every page and read API route that shows stored data — the fixed pages, each agent's
    pages, each version, each round — then every same-site link (``href``, ``hx-get``) those pages
    carry, transitively. Every one answers 2xx. Returns how many pages
    were fetched."""
    queue = [*FIXED_PAGES, *FIXED_API, *policy_pages(), *event_pages()]
    seen: set[str] = set()
    broken = []
    while queue and len(seen) < crawl_limit:
        page = queue.pop(0)
        if page in seen:
            continue
        seen.add(page)
        response = client.get(page)
        if not 200 <= response.status_code < 300:
            broken.append(f"{page} → {response.status_code}")
            continue
        queue.extend(link for link in _links(response) if link not in seen)
    assert not broken, "pages that do not work: " + ", ".join(broken)
    return len(seen)
