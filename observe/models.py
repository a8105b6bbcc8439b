"""Rounds and their events as received from runtimes (DESIGN §4)."""

from __future__ import annotations

from django.db import models

from core.vocabulary import KIND_COUNTERS, ROUND_KINDS
from observe.fields import PackedJSONField


class Round(models.Model):
    """One round (agent, turn_id, iteration): its assembly, merged with every ingested batch.

    ``version`` is a global, strictly growing change number: every change to any round takes the
    next one. The live stream sends "changed up to version N" and each listener fetches what it
    has not seen, so a dropped channel message delays an update instead of losing it.
    """

    agent = models.CharField(max_length=200)
    turn_id = models.CharField(max_length=200)
    iteration = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    generation_finished_at = models.DateTimeField(null=True, blank=True)
    # NULL is meaningful here and in the API: "still in progress" / "the runtime did not say".
    outcome = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    policy_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    max_actions = models.PositiveIntegerField(null=True, blank=True)
    agent_in_policy = models.BooleanField(default=True)
    actions = models.PositiveIntegerField(default=0)
    # One counter column per kind of round (rejections, early_starts, dedups, timeouts), named
    # by the kinds table: a new kind is a new column (and a migration), never a fifth spelling.
    for _kind in ROUND_KINDS:
        vars()[_kind.counter] = models.PositiveIntegerField(default=0)
    del _kind
    #: What the events say, merged a batch at a time (:func:`observe.domain.rounds.assembly_merge`):
    #: per action slot the deciding events' fields, tool ids and params. Ingest reads and writes
    #: this instead of the round's events; lists and cards are built from it alone.
    assembly = PackedJSONField(default=dict)
    #: The round against its prediction under the version its ``policy_hash`` names (issue 13):
    #: ``None`` not checked (unfinished, no hash, a hash no version has: "unknown policy"),
    #: ``False`` the runtime did what that version says, ``True`` it did not (``drift_notes``
    #: says where, in words).
    drift = models.BooleanField(null=True, default=None)
    #: NULL unless ``drift`` (ingest inserts rows without it).
    drift_notes = models.JSONField(null=True, blank=True, default=None)
    version = models.PositiveBigIntegerField(unique=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: Whether the row lies in a day before its ``round.started``'s, or none is stored yet: its
    #: first events came first, stamped earlier (NULL: stored before ingest kept it, migration
    #: 0016, not known). On PostgreSQL the ``round_before_start`` index holds the rows where it
    #: is not False: a batch that starts a round asks it in every day, the other rows only from
    #: the day before the ``round.started`` on (docs/api.md, "Where a round is looked for").
    before_start = models.BooleanField(null=True, default=None)
    #: The partition day (UTC) of the round, its events and its tool rows: the day it started as
    #: first seen, never changed (an earlier event arriving later moves ``started_at``, not the
    #: row). On PostgreSQL the three tables are partitioned by it (docs/architecture.md).
    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "turn_id", "iteration"], name="round_key")
        ]
        indexes = [
            models.Index(fields=["-started_at", "-id"], name="round_newest"),
            models.Index(fields=["agent", "-started_at"], name="round_agent_newest"),
            # Covers the live counters (totals per filter, drift included): a scan of this index
            # instead of the rows, which are wide with their assembly (the last minute's counters
            # read a range of round_newest).
            models.Index(
                fields=["agent", *KIND_COUNTERS, "drift", "started_at"],
                name="round_counters_drift",
            ),
            # The history's has=drift: drifted rounds, newest first, without a scan of the rest.
            models.Index(fields=["drift", "-started_at"], name="round_drift_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.agent}/{self.turn_id}/{self.iteration}"


class RoundTool(models.Model):
    """A tool id a round's actions named: the history's "rounds that used tool X" filter."""

    # No index of its own: round_tool_unique (round, tool_id) serves lookups by round.
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="tools", db_index=False)
    tool_id = models.CharField(max_length=200)
    #: Its round's partition day (:attr:`Round.day`).
    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "tool_id"], name="round_tool_unique")
        ]
        indexes = [models.Index(fields=["tool_id"], name="round_tool_id")]

    def __str__(self) -> str:
        return self.tool_id


class Event(models.Model):
    """One stored event; ``data`` is the normalized event (unknown fields kept). On PostgreSQL
    ``data`` leaves out what the row and its round already hold (``event_id``, ``type``, ``ts``,
    ``agent``, ``turn_id``, ``iteration``): :func:`observe.store.event_whole` puts them back."""

    event_id = models.CharField(max_length=36, unique=True)
    # No index of its own: event_round_ts (round, ts) serves lookups by round; one index less
    # to write per stored event.
    round = models.ForeignKey(
        Round, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    type = models.CharField(max_length=32)
    ts = models.DateTimeField()
    data = PackedJSONField()
    #: Its round's partition day (:attr:`Round.day`): a repeated event goes where its round is.
    day = models.DateField()

    class Meta:
        indexes = [models.Index(fields=["round", "ts"], name="event_round_ts")]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"


class StreamCounter(models.Model):
    """The single row that hands out ``Round.version`` numbers (locked while taking one)."""

    SINGLETON_ID = 1
    value = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"stream version {self.value}"


class ToolHealthBucket(models.Model):
    """One tool's tally over one 5-minute bucket (:mod:`observe.domain.health`): counts of calls,
    timeouts, errors, rejections by code, early starts, dedups and a histogram of durations.
    Kept by ingest; rebuilt from the stored events by ``manage.py toolhealth_backfill``."""

    agent = models.CharField(max_length=200)
    tool_id = models.CharField(max_length=200)
    #: Minutes the row covers from ``bucket``: 5, or 60 (the hourly sum of its 5-minute rows).
    span = models.PositiveSmallIntegerField(default=5)
    bucket = models.DateTimeField()
    #: ``{"calls": n, "timeouts": n, "h:<bin>": n, "r:<code>": n, …}`` without zero counts.
    tally = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "tool_id", "span", "bucket"], name="toolhealth_bucket_key"
            )
        ]
        indexes = [models.Index(fields=["span", "bucket"], name="toolhealth_bucket_time")]

    def __str__(self) -> str:
        return f"{self.agent}/{self.tool_id}@{self.bucket:%Y-%m-%d %H:%M}"


class RoundCountBucket(models.Model):
    """The rounds of one agent that started in one minute, counted: how many, the actions of each
    round kind they hold (``<counter>``, what the live totals add) and how many hold at least one
    (``with_<counter>``, what the history chart draws). Kept by ingest from each round's facts
    before and after a batch (:mod:`observe.round_counts`), taken back when rounds are pruned; a
    minute left with no round has no row. Drift is not kept here: the drifted rounds are few and
    counted from ``round_drift_newest``."""

    agent = models.CharField(max_length=200)
    minute = models.DateTimeField()
    rounds = models.IntegerField(default=0)
    rejections = models.IntegerField(default=0)
    early_starts = models.IntegerField(default=0)
    dedups = models.IntegerField(default=0)
    timeouts = models.IntegerField(default=0)
    with_rejections = models.IntegerField(default=0)
    with_early_starts = models.IntegerField(default=0)
    with_dedups = models.IntegerField(default=0)
    with_timeouts = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "minute"], name="roundcount_agent_minute")
        ]
        indexes = [models.Index(fields=["minute"], name="roundcount_minute")]

    def __str__(self) -> str:
        return f"{self.agent}@{self.minute:%Y-%m-%d %H:%M}: {self.rounds}"


class IngestCount(models.Model):
    """Events posted to ingest since the database was made, by what became of them (``name``:
    one of :data:`observe.store.INGEST_RESULTS`). Only ever added to, one UPDATE per batch in the
    batch's transaction, so every worker reads the same totals (``GET /api/v1/metrics``)."""

    name = models.CharField(max_length=16, primary_key=True)
    value = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}: {self.value}"
