"""Publishing: the draft becomes an immutable version; rollback publishes an older one again.

Reads (``version_*``) and writes (``policy_publish``, ``policy_rollback``) of versions live here,
apart from the draft's own services, because they are one feature: what is in force.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Max

from audit.services import actor_label, audit_record
from core.text import counted
from engine.document.diagnostics import Diagnostic, Severity
from engine.tools.manifest import Manifest, parse_manifest
from engine.tools.resolution import agent_names
from policy.audit_notes import policy_replaced
from policy.domain.analysis import analyze_text
from policy.domain.yaml_io import (
    CLI_MAX_BYTES,
    agent_export_text,
    body_hash,
    dump_body,
    empty_policy,
    export_text,
    load_policy,
    split_header,
)
from policy.models import AgentManifest, PolicyVersion
from policy.selectors import (
    DraftState,
    draft_agent_names,
    draft_analysis,
    draft_state,
    manifest_for,
)
from policy.services import draft_change, draft_lock
from policy.signals import policy_published
from policy.suites import failing_summary, suites_check

# --- reads ------------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def _data(body: str) -> dict[str, Any]:
    loaded = load_policy(body, max_bytes=CLI_MAX_BYTES)
    return loaded.data if not loaded.refused else empty_policy()


def version_data(version: PolicyVersion) -> dict[str, Any]:
    """The version's policy document (parsed once per process: a version never changes); a
    copy the caller may change."""
    return copy.deepcopy(_data(version.body))


def version_text(version: PolicyVersion) -> str:
    """The version's whole-policy export: header + body, byte-identical to ``traitdeck fmt``."""
    return export_text(_data(version.body))


def draft_sha256(state: DraftState) -> str:
    """The hash the draft would get as a version (compare with ``PolicyVersion.sha256``)."""
    return body_hash(dump_body(state.data))


def version_published() -> PolicyVersion | None:
    """The version in force: the newest one."""
    return PolicyVersion.objects.order_by("-number").first()


def version_manifest(version: PolicyVersion, agent: str) -> Manifest | None:
    """The manifest ``agent`` had when ``version`` was published (a version published before
    versions kept manifests: the agent's current one)."""
    if version.manifests is None:
        return manifest_for(agent)
    data = version.manifests.get(agent)
    return parse_manifest(data) if data is not None else None


@dataclass(frozen=True)
class DraftStanding:
    """The draft against what is in force: what the policy pages say at the top."""

    revision: int
    in_force: int | None
    unpublished: bool


def draft_standing(state: DraftState) -> DraftStanding:
    published = version_published()
    return DraftStanding(
        revision=state.revision,
        in_force=published.number if published else None,
        unpublished=published is None or draft_sha256(state) != published.sha256,
    )


def version_get(number: int) -> PolicyVersion | None:
    return PolicyVersion.objects.filter(number=number).first()


def version_list() -> list[PolicyVersion]:
    return list(PolicyVersion.objects.order_by("-number"))


def agent_hashes(data: Any) -> dict[str, str]:
    """Per agent, the hash of the runtime file ``config.yaml`` serves for it (DESIGN §6)."""
    out: dict[str, str] = {}
    for agent in agent_names(data):
        digest, _ = split_header(agent_export_text(data, agent))
        if digest:
            out[agent] = digest
    return out


@dataclass(frozen=True)
class AgentFile:
    text: str
    etag: str
    version: int


def agent_config_file(agent: str) -> AgentFile | None:
    """The published runtime file of one agent, or ``None`` (nothing published, or no such
    agent in the version in force)."""
    version = version_published()
    if version is None:
        return None
    data = _data(version.body)
    if agent not in agent_names(data):
        return None
    text = agent_export_text(data, agent)
    digest, _ = split_header(text)
    return AgentFile(text=text, etag=f'"{digest}"', version=version.number)


# --- writes -----------------------------------------------------------------------------------


class PublishRefused(Exception):
    """Publishing (or rolling back) cannot happen as asked; the message says why."""


class SuitesFailing(Exception):
    """Regression cases fail under the draft: publishing needs an explicit override, which the
    audit log records."""

    def __init__(self, message: str, failing: list[str]) -> None:
        super().__init__(message)
        self.failing = failing


class ConfirmationNeeded(Exception):
    """The change is allowed but needs an explicit confirmation (warnings, errors in an old
    version, unpublished draft changes that a rollback would replace)."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


def _next_number() -> int:
    current = PolicyVersion.objects.aggregate(top=Max("number"))["top"]
    return int(current or 0) + 1


def _create(
    *,
    data: Any,
    actor: Any,
    message: str,
    revision: int,
    rollback_of: int | None = None,
    manifests: dict[str, Any] | None = None,
) -> PolicyVersion:
    body = dump_body(data)
    if manifests is None:
        # The manifests in force now, read in the publishing transaction (a manifest change
        # bumps the draft's revision, which the publish holds locked).
        manifests = dict(AgentManifest.objects.order_by("agent").values_list("agent", "data"))
    return PolicyVersion.objects.create(
        manifests=manifests,
        number=_next_number(),
        body=body,
        sha256=body_hash(body),
        agent_hashes=agent_hashes(data),
        message=message,
        author=actor if getattr(actor, "is_authenticated", False) else None,
        author_name=actor_label(actor),
        draft_revision=revision,
        rollback_of=rollback_of,
    )


def _summary(version: PolicyVersion | None) -> dict[str, Any] | None:
    if version is None:
        return None
    return {"version": version.number, "sha256": version.sha256}


@transaction.atomic
def policy_publish(
    *,
    actor: Any,
    message: str,
    base_revision: int | None = None,
    confirm_warnings: bool = False,
    override_failing_cases: bool = False,
) -> PolicyVersion:
    """Publish the draft as the next version.

    Refused (``PublishRefused``) without a message, with errors, or when the draft is the
    version in force; ``ConfirmationNeeded`` when it has warnings and they were not confirmed;
    ``StaleRevision`` when ``base_revision`` is not the draft's revision.
    """
    message = (message or "").strip()
    if not message:
        raise PublishRefused("A message is required: say what this version changes and why.")
    # Lock the draft row: a concurrent edit waits until the version is recorded.
    state = draft_lock(base_revision=base_revision)
    published = version_published()
    if published is not None and published.sha256 == draft_sha256(state):
        raise PublishRefused(
            f"Nothing to publish: the draft is identical to version {published.number}, "
            "which is in force."
        )
    analysis = draft_analysis(state)
    if analysis.has_errors:
        errors = analysis.summary().get("errors", 0)
        raise PublishRefused(
            f"The draft has {counted(errors, 'error')}: fix {'it' if errors == 1 else 'them'}"
            " first (errors block publishing)."
        )
    warnings = tuple(d for d in analysis.diagnostics if d.severity is Severity.WARNING)
    if warnings and not confirm_warnings:
        raise ConfirmationNeeded(
            f"The draft has {counted(len(warnings), 'warning')}: confirm to publish it anyway.",
            warnings,
        )
    failing = failing_summary(suites_check(state))
    if failing and not override_failing_cases:
        raise SuitesFailing(
            f"{counted(len(failing), 'regression case')} {'fails' if len(failing) == 1 else 'fail'}"
            " under the draft: fix the draft, or publish"
            " with the override (the audit log records it).",
            failing,
        )
    version = _create(data=state.data, actor=actor, message=message, revision=state.revision)
    audit_record(
        actor=actor,
        action="policy.publish",
        target=f"version {version.number}",
        message=message,
        before=_summary(published),
        after=_summary(version),
    )
    _audit_overridden_cases(actor=actor, version=version, done="published", failing=failing)
    _announce(version, actor)
    return version


def _audit_overridden_cases(
    *, actor: Any, version: PolicyVersion, done: str, failing: list[str]
) -> None:
    """Record the failing regression cases an admin overrode to make ``version`` (``done``:
    "published", "rolled back"), when there were any."""
    if failing:
        audit_record(
            actor=actor,
            action="suite.override",
            target=f"version {version.number}",
            message=f"{done} with {counted(len(failing), 'failing regression case')}",
            after={"failing": failing},
        )


@transaction.atomic
def policy_rollback(
    *,
    actor: Any,
    number: int,
    message: str,
    confirm_errors: bool = False,
    confirm_unpublished: bool = False,
    overridden_cases: list[str] | None = None,
) -> PolicyVersion:
    """Publish a copy of version ``number`` as the next version and set the draft to it.
    ``overridden_cases``: regression cases failing under that version that the admin chose to
    override (the audit log records them, as for publishing).

    Nothing is rewritten: the old versions stay, and the audit log keeps the draft that was
    replaced. Needs confirmation when the draft has unpublished changes, and when the old
    version has errors under today's rules.
    """
    message = (message or "").strip()
    if not message:
        raise PublishRefused("A message is required: say why you roll back.")
    target = version_get(number)
    if target is None:
        raise LookupError(f"There is no version {number}.")
    published = version_published()
    if published is not None and published.number == target.number:
        raise PublishRefused(f"Version {number} is already in force.")
    state = draft_state()
    unpublished = published is None or draft_sha256(state) != published.sha256
    if unpublished and not confirm_unpublished:
        raise ConfirmationNeeded(
            f"The draft (revision {state.revision}) has changes that were never published; "
            f"rolling back replaces them with version {number}. Confirm to go on."
        )
    old = analyze_text(version_text(target), max_bytes=CLI_MAX_BYTES)
    if old.has_errors and not confirm_errors:
        errors = tuple(d for d in old.diagnostics if d.severity is Severity.ERROR)
        raise ConfirmationNeeded(
            f"Version {number} has {counted(len(errors), 'error')} under today's rules: "
            "confirm to roll back to it anyway.",
            errors,
        )
    data = version_data(target)
    new_state = draft_change(
        edit=lambda _doc: data,
        base_revision=None,
        user=actor,
        audit=policy_replaced("draft.rollback", message=f"rolled back to version {number}"),
    )
    version = _create(
        data=data,
        actor=actor,
        message=message,
        revision=new_state.revision,
        rollback_of=number,
        # The copy predicts with the tools the old version was published with.
        manifests=target.manifests,
    )
    audit_record(
        actor=actor,
        action="policy.rollback",
        target=f"version {version.number}",
        message=message,
        before={
            **(_summary(published) or {}),
            "draft_revision": state.revision,
            "draft_sha256": draft_sha256(state),
        },
        after={**(_summary(version) or {}), "copy_of": number},
    )
    _audit_overridden_cases(
        actor=actor, version=version, done="rolled back", failing=overridden_cases or []
    )
    _announce(version, actor)
    return version


def _announce(version: PolicyVersion, actor: Any) -> None:
    """Say a version is published (``policy.signals.policy_published``): the KDCube app pushes
    it once committed; a push that fails is recorded beside the version and never undoes it."""
    policy_published.send(sender=PolicyVersion, version=version, actor=actor)


@transaction.atomic
def draft_reset(*, actor: Any, base_revision: int | None, number: int | None = None) -> DraftState:
    """Set the draft to a version's policy: the version in force (``number`` None: "discard the
    draft") or version ``number`` ("edit from version N"). Nothing is published; the audit log
    keeps the draft that is replaced (``draft.discard`` / ``draft.from_version``).

    ``PublishRefused`` when there is no such version (or nothing is published), or when the
    draft already is that version; ``StaleRevision`` on a stale ``base_revision``."""
    target = version_published() if number is None else version_get(number)
    if target is None:
        raise PublishRefused(
            "Nothing is published yet: there is no version to reset the draft to."
            if number is None
            else f"There is no version {number}."
        )
    state = draft_lock(base_revision=base_revision)
    if draft_sha256(state) == target.sha256:
        raise PublishRefused(f"The draft already is version {target.number}: nothing to discard.")
    data = version_data(target)
    if number is None:
        note = policy_replaced("draft.discard", message=f"reset to version {target.number}")
    else:
        note = policy_replaced("draft.from_version", message=f"started from version {number}")
    return draft_change(edit=lambda _doc: data, base_revision=None, user=actor, audit=note)


def agents_in_force() -> frozenset[str]:
    """The agents runtimes can fetch: the published version's once one exists, else the
    draft's (a fresh instance has only a draft).

    Ingest asks on every POST: one plain query for the newest version's per-agent hashes, whose
    agent names are read once per distinct value (a version never changes once stored)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('agent_hashes')} FROM {quote(PolicyVersion._meta.db_table)}"
            f" ORDER BY {quote('number')} DESC LIMIT 1"
        )
        row = cursor.fetchone()
    if row is not None:
        value = row[0]
        if isinstance(value, str):  # JSON text (SQLite; PostgreSQL through Django's loader)
            return _agents_of_hashes(value)
        return frozenset(value) if isinstance(value, dict) else frozenset()
    return frozenset(draft_agent_names())


@lru_cache(maxsize=16)
def _agents_of_hashes(text: str) -> frozenset[str]:
    hashes = json.loads(text)
    return frozenset(hashes) if isinstance(hashes, dict) else frozenset()


@dataclass(frozen=True)
class VersionIndex:
    """Which version each round ran under, for many rounds from one query (DESIGN §6).

    A round is credited to the version **in force when it ran**: the newest version whose file
    for the round's agent has the round's ``policy_hash`` and that was published at or before
    the round started. A rollback publishes a copy with the same hash; it never claims the
    rounds that ran before it. A round without a ``policy_hash`` is credited to none.
    """

    #: ``(agent, per-agent hash) → ((published_at, number), …)``, oldest first.
    published: dict[tuple[str, str], tuple[tuple[datetime, int], ...]]

    def __contains__(self, key: object) -> bool:
        """Some published version has this ``(agent, hash)`` (else: an unknown policy)."""
        return key in self.published

    def credit(self, agent: str, policy_hash: str | None, started_at: datetime) -> int | None:
        """The version in force when a round of ``agent`` reporting ``policy_hash`` started."""
        if not policy_hash:
            return None
        credited = None
        for published_at, number in self.published.get((agent, policy_hash), ()):
            if published_at > started_at:
                break
            credited = number
        return credited

    def windows(self, number: int) -> tuple[tuple[str, str, datetime, datetime | None], ...]:
        """When version ``number`` was credited with rounds, per agent: ``(agent, hash, from,
        until)`` (``until`` None: still), the rounds :meth:`credit` gives to it."""
        found = []
        for (agent, digest), published in self.published.items():
            for i, (published_at, n) in enumerate(published):
                if n == number:
                    until = published[i + 1][0] if i + 1 < len(published) else None
                    found.append((agent, digest, published_at, until))
        return tuple(found)


def version_index() -> VersionIndex:
    """The :class:`VersionIndex` of every version published so far."""
    index: dict[tuple[str, str], list[tuple[datetime, int]]] = {}
    rows = PolicyVersion.objects.order_by("number").values_list(
        "number", "created_at", "agent_hashes"
    )
    for number, created_at, hashes in rows:
        if isinstance(hashes, dict):
            for agent, digest in hashes.items():
                index.setdefault((str(agent), str(digest)), []).append((created_at, int(number)))
    return VersionIndex({key: tuple(value) for key, value in index.items()})
