"""Publishing to KDCube: push a version into the configured bundle's props, read them back,
pull them into the draft, and notice when someone changed them outside Traitdeck.

KDCube's props API has no compare-and-set. A push therefore re-reads the props right before it
writes and refuses when the owned subtree changed since Traitdeck last read it; the window
between that read and KDCube's write remains (docs/kdcube-control-plane.md).

Nothing read from KDCube is stored as a value: what it returns has secrets resolved. Only a
keyed hash of the owned subtree and the paths where it differs from the version are kept.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import actor_label, audit_record
from policy import kdcube_client
from policy.domain import kdcube_props
from policy.domain.kdcube_props import PushRefused
from policy.kdcube_client import KDCubeError
from policy.models import KDCubePush, KDCubeRead, PolicyVersion
from policy.versions import version_data, version_get, version_published

#: Reads kept (about two days of the default poll).
KEEP_READS = 1000


class KDCubeOff(Exception):
    """No KDCube target is configured (the ``TRAITDECK_KDCUBE_*`` settings)."""


def kdcube_target() -> kdcube_client.Target:
    target = kdcube_client.target_from_env()
    if target is None:
        raise KDCubeOff(
            "No KDCube target is configured: set TRAITDECK_KDCUBE_URL, _TENANT, _PROJECT, "
            "_BUNDLE and a token (TRAITDECK_KDCUBE_TOKEN_FILE)."
        )
    return target


def kdcube_configured() -> bool:
    return kdcube_client.target_from_env() is not None


def _hash(target: kdcube_props.Target) -> str:
    """The stored owned subtree's fingerprint, keyed with the instance's secret key: the subtree
    KDCube returns holds resolved secrets, and a plain hash of a short secret could be guessed."""
    text = json.dumps(kdcube_props.without_nulls(target.stored), sort_keys=True, ensure_ascii=False)
    key = settings.SECRET_KEY.encode("utf-8")
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def version_hash(version: PolicyVersion) -> str:
    """The hash a push shows: the version's owned subtree as compared."""
    subtree = kdcube_props.version_subtree(version_data(version))
    return kdcube_props.subtree_hash(
        kdcube_props.comparable(subtree, kdcube_props.secret_paths(subtree))
    )


def _read(target: kdcube_client.Target) -> kdcube_props.Target:
    body = kdcube_client.props_read(target)
    props, defaults = body.get("props"), body.get("defaults")
    return kdcube_props.Target(
        props=props if isinstance(props, dict) else {},
        defaults=defaults if isinstance(defaults, dict) else {},
    )


def last_read() -> KDCubeRead | None:
    return KDCubeRead.objects.first()


def _record_read(
    *,
    target: kdcube_client.Target,
    seen: kdcube_props.Target,
    source: str,
    in_force: PolicyVersion | None,
    updated_by: str = "",
) -> KDCubeRead:
    differs = kdcube_props.differs(seen, version_data(in_force)) if in_force else []
    row = KDCubeRead.objects.create(
        target=target.label,
        source=source,
        stored_hash=_hash(seen),
        version=in_force.number if in_force else None,
        differs=differs,
        updated_by=updated_by[:150],
    )
    # The poll reads every few minutes: keep the recent reads, not all of them (the audit log
    # keeps every outside change).
    KDCubeRead.objects.filter(id__lte=row.id - KEEP_READS).delete()
    return row


@transaction.atomic
def _push_row(
    *, version: PolicyVersion, target: str, status: str, answer: str, actor: Any, digest: str = ""
) -> KDCubePush:
    row = KDCubePush.objects.create(
        version=version.number,
        target=target,
        status=status,
        answer=answer,
        subtree_hash=digest,
        actor_name=actor_label(actor)[:150],
    )
    audit_record(
        actor=actor,
        action=f"kdcube.push.{status}",
        target=f"version {version.number}",
        message=answer or f"pushed to {target}",
        after={"target": target, "hash": digest} if digest else {"target": target},
    )
    return row


# Not atomic as a whole: KDCube's answers can take up to three time limits, and a transaction
# held meanwhile would block every other writer (SQLite takes its write lock at BEGIN). Each
# record (a read, a push and its audit entry) commits on its own.
def kdcube_push(*, actor: Any, number: int | None = None, overwrite: bool = False) -> KDCubePush:
    """Write version ``number`` (default: the one in force) into KDCube's props and check that
    the runtime then loads exactly it. Always records the attempt; never raises for KDCube's
    answer (``KDCubeOff`` without a target, ``LookupError`` for an unknown version)."""
    target = kdcube_target()
    version = version_get(number) if number is not None else version_published()
    if version is None:
        raise LookupError(
            f"There is no version {number}." if number is not None else "Nothing is published."
        )
    data = version_data(version)

    def refused(text: str) -> KDCubePush:
        return _push_row(
            version=version, target=target.label, status="refused", answer=text, actor=actor
        )

    def failed(text: str) -> KDCubePush:
        return _push_row(
            version=version, target=target.label, status="failed", answer=text, actor=actor
        )

    previous = last_read()
    try:
        current = _read(target)
    except KDCubeError as exc:
        return failed(str(exc))
    stored_hash = _hash(current)
    if not overwrite:
        if previous is None:
            return refused(
                "Traitdeck never read this bundle's props: import from KDCube first (to see "
                "what is there), or push with “overwrite KDCube's subtree”."
            )
        if previous.stored_hash != stored_hash:
            in_force = version_published()
            now = kdcube_props.differs(current, version_data(in_force)) if in_force else []
            where = ", ".join(now) if now else "the owned subtree"
            return refused(
                f"The props changed in KDCube since Traitdeck read them at "
                f"{timezone.localtime(previous.at):%Y-%m-%d %H:%M:%S}: {where} now differ"
                f"{f' from version {in_force.number}' if in_force else ''}. Import from KDCube"
                " to review, or push with “overwrite KDCube's subtree”."
            )
    try:
        patch = kdcube_props.push_patch(current, data)
    except PushRefused as exc:
        return refused(str(exc))
    try:
        kdcube_client.props_merge(target, patch)
        back = _read(target)
    except KDCubeError as exc:
        return failed(str(exc))
    _record_read(target=target, seen=back, source="push", in_force=version_published())
    differs = kdcube_props.differs(back, data)
    if differs:
        return failed(
            "Written, but the runtime would load something else at " + ", ".join(differs) + "."
        )
    return _push_row(
        version=version,
        target=target.label,
        status="pushed",
        answer="",
        actor=actor,
        digest=version_hash(version),
    )


@dataclass(frozen=True)
class Observed:
    read: KDCubeRead
    outside_change: bool


def kdcube_observe(*, source: str, updated_by: str = "") -> Observed:
    """Read the target and compare it with the version in force (the drift listener, the
    fallback poll, a pull). A subtree that changed since the last read and now differs from the
    version is recorded in the audit log as an outside change. Raises ``KDCubeError``."""
    target = kdcube_target()
    previous = last_read()
    in_force = version_published()
    seen = _read(target)  # outside any transaction: see kdcube_push
    with transaction.atomic():
        return _observed(target, seen, previous, in_force, source, updated_by)


def _observed(
    target: kdcube_client.Target,
    seen: kdcube_props.Target,
    previous: KDCubeRead | None,
    in_force: PolicyVersion | None,
    source: str,
    updated_by: str,
) -> Observed:
    row = _record_read(
        target=target, seen=seen, source=source, in_force=in_force, updated_by=updated_by
    )
    outside = bool(row.differs and (previous is None or previous.stored_hash != row.stored_hash))
    if outside:
        audit_record(
            actor=f"kdcube:{updated_by}" if updated_by else "kdcube",
            action="kdcube.outside-change",
            target=target.label,
            message=config_drift_sentence(row) or "",
            after={"differs": row.differs, "version": row.version, "hash": row.stored_hash},
        )
    return Observed(read=row, outside_change=outside)


def config_drift_sentence(row: KDCubeRead | None) -> str | None:
    """The config-drift sentence ("changed in KDCube at 10:02 by admin: agents.main differs
    from version 3"); None when there is no config drift."""
    if row is None or not row.differs:
        return None
    who = f" by {row.updated_by}" if row.updated_by else ""
    count = len(row.differs)
    what = ", ".join(row.differs[:3]) + ("…" if count > 3 else "")
    verb = "differs" if count == 1 else "differ"
    return (
        f"changed in KDCube at {timezone.localtime(row.at):%H:%M}{who}: {what} {verb} from "
        f"version {row.version}"
    )


def config_drift() -> KDCubeRead | None:
    """The last read when it differs from the version in force (else None)."""
    row = last_read()
    in_force = version_published()
    if row is None or not row.differs or in_force is None or row.version != in_force.number:
        return None
    return row


def push_status(numbers: list[int]) -> dict[int, KDCubePush]:
    """The newest push of each of ``numbers`` (absent: not pushed)."""
    out: dict[int, KDCubePush] = {}
    for row in KDCubePush.objects.filter(version__in=numbers).order_by("-at", "-id"):
        out.setdefault(row.version, row)
    return out


@dataclass(frozen=True)
class Pulled:
    text: str
    #: Paths (as people read them) whose value is a secret Traitdeck did not import.
    secrets: list[str]


def kdcube_pull() -> Pulled:
    """The owned subtree the runtime loads (defaults ← props) as a policy file for the import
    preview. Values outside the owned subtree are never read; in credential positions the
    reference Traitdeck holds (draft, version in force) is kept, else the value is shown as
    "secret, not imported". Raises ``KDCubeError``/``KDCubeOff``."""
    from policy.selectors import draft_state

    target = kdcube_target()
    seen = _read(target)
    in_force = version_published()
    _record_read(target=target, seen=seen, source="pull", in_force=in_force)
    known = [kdcube_props.version_subtree(draft_state().data)]
    if in_force is not None:
        known.append(kdcube_props.version_subtree(version_data(in_force)))
    subtree, secrets = kdcube_props.pulled_subtree(seen.effective or {}, *known)
    text = yaml.safe_dump(
        {"surfaces": {"as_consumer": subtree}}, sort_keys=False, allow_unicode=True
    )
    return Pulled(text=text, secrets=secrets)
