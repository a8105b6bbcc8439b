"""Drift on ingest (issue 13): each finished round whose ``policy_hash`` names a published
version is predicted under that version; a disagreement marks the round ``drift`` with the
disagreements in words (:mod:`observe.domain.drift`).

It runs after the batch is stored (its own short transaction, one UPDATE per batch), so a
failure here never loses an event: the round stays unchecked and the error is logged. Versions
are parsed and resolved once per process (a version never changes, nor do the manifests it was
published with).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engine.catalog.multi_action import ModeSources, profile_mode
from engine.round.react_version import VersionSources, react_version
from engine.traits.round_policy import RoundPolicy
from observe.domain.drift import round_drift, summary
from observe.domain.rounds import Assembly, started_react_version
from observe.models import Round
from policy.selectors import policy_agent_run
from policy.versions import VersionIndex, version_data, version_get, version_index, version_manifest

logger = logging.getLogger(__name__)

_NO_TOOLS = RoundPolicy.of(())


@lru_cache(maxsize=64)
def _version_policy(number: int, agent: str) -> tuple[RoundPolicy, str | None]:
    """The round policy and default multi-action mode of ``agent`` under version ``number``."""
    found = version_get(number)
    if found is None:
        return _NO_TOOLS, None
    data = version_data(found)
    run = policy_agent_run(data, agent, manifest_of=lambda name: version_manifest(found, name))
    policy = RoundPolicy.of(run.resolution.tools)
    return policy, profile_mode(data, agent, None)


def rounds_check_drift(
    pks: Iterable[int],
    *,
    assemblies: Mapping[int, Assembly] | None = None,
    versions: VersionIndex | None = None,
) -> dict[int, bool | None]:
    """Check the finished rounds among ``pks``; returns each checked round's drift.
    ``assemblies``: the rounds' assemblies when the caller has them (not read again)."""
    query = Round.objects.filter(pk__in=list(pks), outcome__isnull=False, policy_hash__isnull=False)
    if assemblies is not None:
        query = query.defer("assembly")
    rows = list(query)
    if not rows:
        return {}
    if versions is None:
        versions = version_index()
    now = timezone.now()
    changed: list[Round] = []
    checked: dict[int, bool | None] = {}
    for row in rows:
        number = versions.credit(row.agent, row.policy_hash, row.started_at)
        if number is None:  # "unknown policy": nothing to predict with
            verdict: tuple[bool | None, list[Any] | None] = (None, None)
        else:
            policy, mode = _version_policy(number, row.agent)
            assembly = assemblies[row.pk] if assemblies is not None else row.assembly
            reported, inferred = started_react_version(assembly)
            version, _source = react_version(
                VersionSources(
                    reported=reported,
                    inferred=inferred,
                    setting=settings.TRAITDECK_REACT_AGENT_VERSION,
                )
            )
            found = round_drift(
                (row.agent, row.turn_id, row.iteration),
                assembly,
                policy,
                # The drift notes say which react agent the prediction assumed.
                policy_label=f"policy v{number} (react {version})",
                react_version=version,
                # The setting is read now, not cached with the version.
                mode=ModeSources(None, mode, settings.TRAITDECK_MULTI_ACTION_MODE),
                dedups_reported=not assembly.get("inferred", False),
            )
            result = summary(found)
            verdict = (True, list(result["discrepancies"])) if result["drift"] else (False, None)
        if (row.drift, row.drift_notes) != verdict:
            row.drift, row.drift_notes = verdict
            row.updated_at = now  # a new card: cards are kept per (round, version, updated_at)
            changed.append(row)
        checked[row.pk] = verdict[0]
    if changed:
        _write(changed)
    return checked


def _write(rows: list[Round]) -> None:
    """One plain ``executemany`` (``bulk_update`` builds a CASE per row and costs more than
    the check itself)."""
    quote = connection.ops.quote_name
    fields: list[Any] = [
        Round._meta.get_field(name) for name in ("drift", "drift_notes", "updated_at")
    ]
    sql = (
        f"UPDATE {quote(Round._meta.db_table)} SET "
        + ", ".join(f"{quote(field.column)} = %s" for field in fields)
        + f" WHERE {quote('id')} = %s"
    )
    params = [
        [
            *(field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields),
            row.pk,
        ]
        for row in rows
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql, params)


@dataclass(frozen=True, slots=True)
class Stored:
    """A round as a batch has just stored it: what the drift check needs, so that it reads
    back only the rounds it can have something to say about."""

    agent: str
    policy_hash: str | None
    finished: bool
    #: The round's drift before the batch (``None``: never checked, or no version to check by).
    drift: bool | None
    assembly: Assembly


def check_drift_after_ingest(stored: Mapping[int, Stored]) -> dict[int, bool | None]:
    """:func:`rounds_check_drift` for the rounds a batch stored (by primary key), never failing
    the batch. A finished round whose policy names no version gets no verdict (``None``); it is
    read back only if it had one to clear."""
    try:
        candidates = {pk: s for pk, s in stored.items() if s.finished and s.policy_hash}
        if not candidates:
            return {}
        versions = version_index()
        wanted = {
            pk: s
            for pk, s in candidates.items()
            if (s.agent, s.policy_hash) in versions or s.drift is not None
        }
        checked: dict[int, bool | None] = dict.fromkeys(candidates)
        if wanted:
            checked.update(
                rounds_check_drift(
                    wanted,
                    assemblies={pk: s.assembly for pk, s in wanted.items()},
                    versions=versions,
                )
            )
        return checked
    except Exception:
        logger.exception("drift check failed; the rounds stay unchecked")
        return {}
