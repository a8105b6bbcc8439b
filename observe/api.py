"""Observe API: runtimes post round events; people and tools query the rounds (DESIGN §4, §6).

Handlers stay thin: check the request, call one service or selector, shape the response. The
ingest body is read by hand rather than through a schema so that each way a body can be wrong
gets its own status (400 not JSON, 413 too large, 415 wrong type, 422 wrong shape) and a plain
sentence, and so that one bad event never refuses the batch (it is reported by index instead).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import P, QueryEx, Router, Schema, Status
from ninja.errors import HttpError

from accounts.auth import RuntimeTokenAuth, session_auth
from core.timewindow import TimeWindowError, format_ts, parse_moment
from core.vocabulary import COUNT_KEYS, OUTCOME_FILTERS
from observe.domain.rounds import recorded_round, round_detail_dict, round_error
from observe.models import Round
from observe.recorded_impact import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    RoundWindow,
    SideError,
    policy_impact,
    policy_side,
)
from observe.selectors import (
    HAS_NAMES,
    RoundFilter,
    round_assembled,
    round_get,
    round_url,
    rounds_page,
)
from observe.services import events_ingest
from policy.versions import VersionIndex, agents_in_force, version_index
from web.api_io import read_json, request_body

router = Router(tags=["rounds"])

MAX_BODY_BYTES: Final = 1024 * 1024
MAX_EVENTS: Final = 1000
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
#: The largest iteration a round can have (the protocol's bound on counts).
MAX_ITERATION: Final = 2**31 - 1

#: People read rounds with their session; tools with a runtime token that may read events.
READ_AUTH = [session_auth, RuntimeTokenAuth("events:read")]


class ErrorOut(Schema):
    error: str


class RejectedOut(Schema):
    index: int
    error: str


class IngestOut(Schema):
    accepted: int
    duplicates: int
    rejected: list[RejectedOut]


class CountsOut(Schema):
    actions: int
    rejections: int
    early_starts: int
    dedups: int
    timeouts: int


class RoundOut(Schema):
    agent: str
    turn_id: str
    iteration: int
    started_at: str
    finished_at: str | None
    outcome: str | None
    policy_hash: str | None
    policy_version: int | None
    agent_in_policy: bool
    #: null: not checked (unfinished, no hash, or a hash no version has: see unknown_policy).
    drift: bool | None
    unknown_policy: bool
    counts: CountsOut
    url: str
    #: Why a failed round failed, as its round.finished said (null when it did not say).
    error_code: str | None
    error_message: str | None


class RoundsPageOut(Schema):
    rounds: list[RoundOut]
    next: str | None


EVENTS_BODY: Final = request_body(
    {
        "type": "object",
        "required": ["events"],
        "properties": {
            "events": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_EVENTS,
                "items": {"type": "object"},
            }
        },
    }
)

ERRORS: Final = {400: ErrorOut, 413: ErrorOut, 415: ErrorOut, 422: ErrorOut}


# --- ingest ---------------------------------------------------------------------------------


def read_events(request: HttpRequest) -> list[Any]:
    """The ``events`` list of an ingest body, after every check of the body as a whole. Text
    is not checked here: an event whose text cannot be stored is rejected by its index."""
    data = read_json(request, limit=MAX_BODY_BYTES, check_text=False)
    if not isinstance(data, dict):
        raise HttpError(422, 'The body must be a JSON object like {"events": [ … ]}.')
    events = data.get("events")
    if not isinstance(events, list):
        raise HttpError(422, 'The body must hold a list of events: {"events": [ … ]}.')
    if not events:
        raise HttpError(422, "The events list is empty; send at least one event.")
    if len(events) > MAX_EVENTS:
        raise HttpError(
            413,
            f"A batch holds at most {MAX_EVENTS} events; this one has {len(events)}."
            " Send them in several batches.",
        )
    return events


@router.post(
    "/events",
    auth=RuntimeTokenAuth("events:write"),
    response={200: IngestOut, **ERRORS},
    openapi_extra=EVENTS_BODY,
)
def post_events(request: HttpRequest) -> Any:
    """Store a batch of round events (1–1000, at most 1 MiB). Valid events are stored even when
    others are invalid; each invalid one is reported by index. A repeated `event_id` with the
    same content counts as a duplicate; `accepted` counts newly stored events only."""
    events = read_events(request)
    # The draft is the policy in force until versions exist.
    result = events_ingest(events, known_agents=agents_in_force())
    return Status(200, result.to_dict())


# --- history --------------------------------------------------------------------------------


def parse_time(name: str, value: str | None) -> datetime | None:
    """A ``since`` / ``until`` bound as ``core.timewindow`` reads it (no offset: UTC), or 422."""
    try:
        return parse_moment(name, value, now=datetime.now(UTC))
    except TimeWindowError as exc:
        raise HttpError(422, str(exc)) from None


def parse_outcome(value: str | None) -> str | None:
    if not value:
        return None
    if value not in OUTCOME_FILTERS:
        raise HttpError(
            422, f"outcome must be one of {', '.join(OUTCOME_FILTERS)} (got {value[:60]!r})."
        )
    return value


def parse_kinds(values: list[str]) -> frozenset[str]:
    unknown = [value for value in values if value not in HAS_NAMES]
    if unknown:
        raise HttpError(
            422,
            f"has must be one of {', '.join(HAS_NAMES)} (got {unknown[0][:60]!r}).",
        )
    return frozenset(values)


def _unknown_policy(row: Round, versions: VersionIndex) -> bool:
    """The round names a policy hash that no published version has for its agent."""
    return row.policy_hash is not None and (row.agent, row.policy_hash) not in versions


def round_out(row: Round, versions: VersionIndex) -> dict[str, Any]:
    """The round object of §4 from the row's columns (no re-assembly: a page holds up to 500).
    ``versions`` is :func:`policy.versions.version_index`: ``policy_version`` is the version in
    force when the round started, among those whose per-agent hash is its ``policy_hash``
    (DESIGN §6)."""
    error_code, error_message = round_error(row.assembly)
    return {
        "agent": row.agent,
        "turn_id": row.turn_id,
        "iteration": row.iteration,
        "started_at": format_ts(row.started_at),
        "finished_at": format_ts(row.finished_at) if row.finished_at is not None else None,
        "outcome": row.outcome,
        "policy_hash": row.policy_hash,
        "policy_version": versions.credit(row.agent, row.policy_hash, row.started_at),
        "agent_in_policy": row.agent_in_policy,
        "drift": row.drift,
        "unknown_policy": _unknown_policy(row, versions),
        "counts": {key: getattr(row, key) for key in COUNT_KEYS},
        "url": round_url(row),
        "error_code": error_code,
        "error_message": error_message,
    }


def _round_filter(
    agent: str | None,
    has: list[str],
    tool: str | None,
    turn: str | None,
    outcome: str | None,
    since: str | None,
    until: str | None,
) -> RoundFilter:
    """The history's filters (DESIGN §6), shared by the listing and the export."""
    return RoundFilter(
        agent=agent or None,
        has=parse_kinds(has),
        tool=tool or None,
        since=parse_time("since", since),
        until=parse_time("until", until),
        turn=turn or None,
        outcome=parse_outcome(outcome),
    )


#: Rounds read per query while an export streams.
EXPORT_PAGE: Final = 1000
MAX_EXPORT: Final = 1_000_000


@router.get(
    "/rounds/export.jsonl",
    auth=READ_AUTH,
    response={200: None, 422: ErrorOut},
    summary="Export rounds for replay",
    openapi_extra={
        "responses": {
            "200": {
                "description": "One recorded round per line (JSON Lines)",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        }
    },
)
def export_rounds(
    request: HttpRequest,
    agent: str | None = None,
    has: QueryEx[
        list[str], P(description="rejection, early, dedup, timeout or drift; repeated: AND")
    ] = [],  # noqa: B006 (ninja copies defaults; never mutated)
    tool: QueryEx[str | None, P(description="case-insensitive substring of a tool id")] = None,
    turn: QueryEx[str | None, P(description="substring of the turn_id")] = None,
    outcome: QueryEx[str | None, P(description="ok, retried, failed or in_progress")] = None,
    since: QueryEx[str | None, P(description="ISO 8601, or 15m / 1h / 24h / 7d before now")] = None,
    until: QueryEx[str | None, P(description="ISO 8601, or 15m / 1h / 24h / 7d before now")] = None,
    limit: QueryEx[int | None, P(description=f"the newest N (1 to {MAX_EXPORT:,})")] = None,
) -> Any:
    """The rounds the history's filters select, newest first, one JSON object per line as
    `traitdeck replay --rounds` reads it: a dry-run round (`turn_id`, `iteration`,
    `max_actions`, `multi_action_mode` when the round reported one, `attempts` of observed
    actions with their tool ids and params) plus its `agent`. Rounds with no observed action
    (nothing to replay) are left out."""
    if limit is not None and not 1 <= limit <= MAX_EXPORT:
        raise HttpError(422, f"limit must be between 1 and {MAX_EXPORT:,} (got {limit}).")
    round_filter = _round_filter(agent, has, tool, turn, outcome, since, until)
    wanted = limit if limit is not None else MAX_EXPORT

    async def lines() -> AsyncIterator[bytes]:
        cursor, left = None, wanted
        while left > 0:
            rows, cursor = await sync_to_async(rounds_page)(
                round_filter, limit=min(EXPORT_PAGE, left), before=cursor
            )
            left -= len(rows)
            chunk = []
            for row in rows:
                found = recorded_round((row.agent, row.turn_id, row.iteration), row.assembly)
                if found is not None:
                    chunk.append(json.dumps(found, ensure_ascii=False) + "\n")
            if chunk:
                yield "".join(chunk).encode("utf-8")
            if cursor is None:
                return

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="traitdeck-rounds.jsonl"'
    return response


@router.get("/rounds", auth=READ_AUTH, response={200: RoundsPageOut, 422: ErrorOut})
def list_rounds(
    request: HttpRequest,
    agent: str | None = None,
    has: QueryEx[
        list[str], P(description="rejection, early, dedup, timeout or drift; repeated: AND")
    ] = [],  # noqa: B006 (ninja copies defaults; never mutated)
    tool: QueryEx[
        str | None, P(description="case-insensitive substring of a tool id the round used")
    ] = None,
    turn: QueryEx[str | None, P(description="substring of the turn_id")] = None,
    outcome: QueryEx[str | None, P(description="ok, retried, failed or in_progress")] = None,
    since: QueryEx[
        str | None,
        P(description="ISO 8601, or 15m / 1h / 24h / 7d before now; started at or after"),
    ] = None,
    until: QueryEx[
        str | None, P(description="ISO 8601, or 15m / 1h / 24h / 7d before now; started before")
    ] = None,
    limit: QueryEx[int, P(description=f"1 to {MAX_LIMIT}")] = DEFAULT_LIMIT,
    before: QueryEx[str | None, P(description="the `next` cursor of the previous page")] = None,
) -> Any:
    """Past rounds, newest first, filtered; `next` continues after this page (null: the end)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise HttpError(422, f"limit must be between 1 and {MAX_LIMIT} (got {limit}).")
    round_filter = _round_filter(agent, has, tool, turn, outcome, since, until)
    rows, next_cursor = rounds_page(round_filter, limit=limit, before=before or None)
    versions = version_index()
    return Status(200, {"rounds": [round_out(row, versions) for row in rows], "next": next_cursor})


@router.get(
    "/rounds/{agent}/{path:turn_id_and_iteration}",
    auth=READ_AUTH,
    response={200: dict[str, Any], 404: ErrorOut},
    summary="Get one round",
)
def get_round(request: HttpRequest, agent: str, turn_id_and_iteration: str) -> Any:
    """The assembled round `<agent>/<turn_id>/<iteration>` with its attempts and events. A
    `turn_id` may contain `/`: the iteration is always the last segment."""
    turn_id, _, iteration = turn_id_and_iteration.rpartition("/")
    row = None
    if turn_id and re.fullmatch(r"[0-9]{1,10}", iteration) and int(iteration) <= MAX_ITERATION:
        row = round_get(agent, turn_id, int(iteration))
    if row is None:
        raise HttpError(404, f"There is no round {agent}/{turn_id_and_iteration}.")
    detail = round_detail_dict(
        round_assembled(row), round_url(row), agent_in_policy=row.agent_in_policy
    )
    versions = version_index()
    detail["policy_version"] = versions.credit(row.agent, row.policy_hash, row.started_at)
    detail["drift"] = row.drift
    detail["drift_notes"] = row.drift_notes
    detail["unknown_policy"] = _unknown_policy(row, versions)
    return Status(200, detail)


IMPACT_BODY: Final = request_body(
    {
        "type": "object",
        "properties": {
            "candidate": {"type": "string", "default": "draft"},
            "baseline": {"type": "string", "default": "published"},
            "limit": {"type": "integer", "default": DEFAULT_WINDOW},
            "agent": {"type": "string"},
            "has": {"type": "array", "items": {"type": "string"}},
            "tool": {"type": "string"},
            "turn": {"type": "string"},
            "outcome": {"type": "string"},
            "since": {"type": "string"},
            "until": {"type": "string"},
            "before": {"type": "string"},
        },
    },
    required=False,
)
#: Body fields of an impact request that are text (the history's filters and the two sides).
_IMPACT_TEXT: Final = (
    "candidate",
    "baseline",
    "agent",
    "tool",
    "turn",
    "outcome",
    "since",
    "until",
    "before",
)


@router.post(
    "/policy/impact",
    auth=session_auth,
    response={200: dict[str, Any], 422: ErrorOut},
    openapi_extra=IMPACT_BODY,
    summary="Impact of a policy change on recorded rounds",
)
def impact(request: HttpRequest) -> Any:
    """Replay the newest `limit` recorded rounds (the history's filters narrow them) under the
    `candidate` (default `draft`) and the `baseline` (default `published`; either may be a
    version number) and list what changes: actions newly rejected or no longer (by rule),
    dropped, early starts and dedups gained or lost, per tool, agent and rule, with every
    affected round and its page."""
    body = read_json(request, limit=64 * 1024) if request.body else {}
    if not isinstance(body, dict):
        raise HttpError(422, "The body is a JSON object (every field optional).")
    for name in _IMPACT_TEXT:
        if body.get(name) is not None and not isinstance(body[name], str):
            raise HttpError(422, f"{name} must be a string.")
    has = body.get("has") or []
    if not isinstance(has, list) or not all(isinstance(kind, str) for kind in has):
        raise HttpError(422, "has must be a list of kinds (rejection, early, dedup, timeout).")
    limit = body.get("limit", DEFAULT_WINDOW)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_WINDOW:
        raise HttpError(422, f"limit must be a whole number from 1 to {MAX_WINDOW:,}.")
    try:
        candidate = policy_side(body.get("candidate") or "draft")
        baseline = policy_side(body.get("baseline") or "published")
    except SideError as exc:
        raise HttpError(422, str(exc)) from None
    round_filter = _round_filter(
        body.get("agent"),
        has,
        body.get("tool"),
        body.get("turn"),
        body.get("outcome"),
        body.get("since"),
        body.get("until"),
    )
    window = RoundWindow(round_filter, limit, body.get("before") or None)
    report = policy_impact(candidate, baseline, round_filter=round_filter, window=window)
    found = report.as_json()
    for item, affected in zip(found["affected"], report.affected, strict=True):
        item["url"] = round_url(affected)  # type: ignore[arg-type]
    return {
        "candidate": candidate.label,
        "baseline": baseline.label,
        **found,
        # Rounds read (with or without something to replay), and the cursor to continue after
        # them as "before" (null: no older rounds): a long window in steps, with progress.
        "read": window.read,
        "next": window.next,
    }
