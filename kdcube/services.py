"""Publishing to KDCube: push a version into the configured bundle's props, read them back,
pull them into the draft, and notice when someone changed them outside Traitdeck.

KDCube's props API has no compare-and-set. A push therefore re-reads the props right before it
writes and refuses when the owned subtree moved away from the guard's **baseline**: what
Traitdeck read back after its last push, or took in with an applied import. Reads by the bridge,
the poll, previews and dry runs never move it. The window between that read and KDCube's write
remains (docs/kdcube-control-plane.md); pushes to one bundle are serialized.

What KDCube returns has secrets resolved, so no value read from it is kept as it was read: a
keyed hash of the owned subtree, and a redacted copy holding only allow-listed values (traits'
strategy and execution fields, ``allowed`` entries, connection names and aliases) with a keyed
digest for every other value (``kdcube.domain.drift``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import yaml
from django.conf import settings
from django.core import signing
from django.db import OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import actor_label, audit_record
from engine.catalog.multi_action import inert_mode_keys, inert_mode_message
from engine.document.diagnostics import Diagnostic, Severity
from kdcube import client as kdcube_client
from kdcube.client import KDCubeError
from kdcube.domain import drift as kdcube_drift
from kdcube.domain import props as kdcube_props
from kdcube.domain.props import PushRefused
from kdcube.models import KDCubeBundle, KDCubePush, KDCubeRead
from policy.models import PolicyVersion
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
    changes: list[dict[str, Any]] | None = None,
    inert: list[str] | None = None,
) -> KDCubeRead:
    differs = kdcube_props.differs(seen, version_data(in_force)) if in_force else []
    row = KDCubeRead.objects.create(
        target=target.label,
        source=source,
        stored_hash=_hash(seen),
        version=in_force.number if in_force else None,
        differs=differs,
        updated_by=updated_by[:150],
        changes=changes or [],
        inert=inert or [],
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


def _key() -> bytes:
    return settings.SECRET_KEY.encode("utf-8")


def _snapshot(seen: kdcube_props.Target) -> Any:
    """The stored owned subtree, redacted (allow-listed values kept, others a keyed digest)."""
    return kdcube_drift.redacted(kdcube_props.without_nulls(seen.stored), _key())


def _bundle(label: str) -> KDCubeBundle:
    row, _created = KDCubeBundle.objects.get_or_create(target=label)
    return row


def baseline(label: str | None = None) -> KDCubeBundle | None:
    """The guard's baseline of the configured target (``None``: never pushed or taken in)."""
    label = label or kdcube_target().label
    row = KDCubeBundle.objects.filter(target=label).first()
    return row if row is not None and row.baseline_hash else None


def _set_baseline(
    label: str, seen: kdcube_props.Target, *, source: str, version: int | None = None
) -> None:
    KDCubeBundle.objects.update_or_create(
        target=label,
        defaults={
            "baseline_hash": _hash(seen),
            "baseline": _snapshot(seen),
            "baseline_source": source,
            "baseline_version": version,
            "baseline_at": timezone.now(),
        },
    )


def _changes(
    bundle: KDCubeBundle | None, seen: kdcube_props.Target, in_force: PolicyVersion | None
) -> list[kdcube_drift.Change]:
    """How the stored owned subtree differs from the baseline, named down to the trait (empty
    when it does not, or when only the baseline's hash is known)."""
    if bundle is None or not bundle.baseline_hash or bundle.baseline is None:
        return []
    if bundle.baseline_hash == _hash(seen):
        return []
    number = bundle.baseline_version if bundle.baseline_source == "push" else None
    version = version_get(number) if number is not None else in_force
    wanted = (
        kdcube_drift.redacted(kdcube_props.version_subtree(version_data(version)), _key())
        if version is not None
        else None
    )
    return kdcube_drift.changes(
        bundle.baseline,
        _snapshot(seen),
        version=wanted,
        version_number=version.number if version is not None else None,
    )


def _changes_text(found: list[kdcube_drift.Change], fallback: str) -> str:
    return "; ".join(kdcube_drift.lines(found)) if found else fallback


def inert_keys(seen: kdcube_props.Target) -> list[str]:
    """Keys of the stored props the runtime never reads (``key-inert``): a ``multi_action_mode``
    set on an agent's react block, as KDCube's admin widget writes it."""
    subtree = seen.effective
    agents = subtree.get("agents") if isinstance(subtree, dict) else None
    names = list(agents) if isinstance(agents, dict) else []
    return inert_mode_keys(seen.props, names)


def inert_diagnostics(keys: list[str]) -> list[Diagnostic]:
    out = []
    for key in keys:
        message, hint = inert_mode_message(key)
        out.append(Diagnostic(Severity.WARNING, "key-inert", key, None, None, message, hint))
    return out


@contextmanager
def _push_lease(target: kdcube_client.Target) -> Iterator[KDCubeBundle | None]:
    """Hold the bundle for one push: a second push waits for the first to end (at most the time
    one push may take), then runs; ``None`` when it waited that long in vain. A lease, not a
    database lock: no transaction is held while KDCube answers (SQLite takes its write lock at
    BEGIN). A crashed push's lease runs out after the same time."""
    label = target.label
    _bundle(label)
    hold = timedelta(seconds=4 * target.timeout_s + 5)
    give_up = time.monotonic() + hold.total_seconds()
    while True:
        now = timezone.now()
        try:
            claimed = (
                KDCubeBundle.objects.filter(target=label)
                .filter(Q(push_until__isnull=True) | Q(push_until__lt=now))
                .update(push_until=now + hold)
            )
        except OperationalError:  # SQLite: another writer holds the lock; ask again
            claimed = 0
        if claimed or time.monotonic() >= give_up:
            break
        time.sleep(PUSH_WAIT_STEP_S)
    if not claimed:
        yield None
        return
    try:
        yield KDCubeBundle.objects.get(target=label)
    finally:
        _release(label)


def _release(label: str) -> None:
    """End the push's lease (retried while SQLite's lock is busy; it runs out anyway)."""
    for _attempt in range(50):
        try:
            KDCubeBundle.objects.filter(target=label).update(push_until=None)
            return
        except OperationalError:
            time.sleep(PUSH_WAIT_STEP_S)


# Not atomic as a whole: KDCube's answers can take up to three time limits, and a transaction
# held meanwhile would block every other writer (SQLite takes its write lock at BEGIN). Each
# record (a read, a push and its audit entry) commits on its own; pushes to one bundle are
# serialized by a lease (``_push_lease``).
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
    with _push_lease(target) as bundle:
        if bundle is None:
            return _push_row(
                version=version,
                target=target.label,
                status="refused",
                answer="Another push to this bundle did not end in time; nothing was written."
                " Push again.",
                actor=actor,
            )
        return _push_held(target, bundle, version, actor=actor, overwrite=overwrite)


def _push_held(
    target: kdcube_client.Target,
    bundle: KDCubeBundle,
    version: PolicyVersion,
    *,
    actor: Any,
    overwrite: bool,
) -> KDCubePush:
    data = version_data(version)

    def refused(text: str) -> KDCubePush:
        return _push_row(
            version=version, target=target.label, status="refused", answer=text, actor=actor
        )

    def failed(text: str) -> KDCubePush:
        return _push_row(
            version=version, target=target.label, status="failed", answer=text, actor=actor
        )

    try:
        current = _read(target)
    except KDCubeError as exc:
        return failed(str(exc))
    if not overwrite:
        if not bundle.baseline_hash:
            return refused(
                "Traitdeck never wrote or took in this bundle's props: import from KDCube first "
                "(and apply it, to see what is there), or push with “overwrite KDCube's subtree”."
            )
        if bundle.baseline_hash != _hash(current):
            in_force = version_published()
            found = _changes(bundle, current, in_force)
            now = kdcube_props.differs(current, version_data(in_force)) if in_force else []
            fallback = (", ".join(now) if now else "the owned subtree") + " changed"
            how = "pushed" if bundle.baseline_source == "push" else "took in"
            when = (
                f"{timezone.localtime(bundle.baseline_at):%Y-%m-%d %H:%M:%S}"
                if (bundle.baseline_at)
                else "last"
            )
            return refused(
                f"The props changed in KDCube since Traitdeck {how} them at {when}: "
                f"{_changes_text(found, fallback)}. Nothing was written. Import from KDCube to "
                f"review, or push version {version.number} again with “overwrite KDCube's "
                "subtree”."
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
    # What was read back is the baseline, also when it differs from the version (a failed push
    # below): the guard compares the next push with what KDCube held after this write.
    _set_baseline(target.label, back, source="push", version=version.number)
    in_force = version_published()
    _record_read(target=target, seen=back, source="push", in_force=in_force, inert=inert_keys(back))
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
    #: ``None``: coalesced into another read, and none is stored yet.
    read: KDCubeRead | None
    outside_change: bool
    #: The call was answered by another call's read (at most one read per ``READ_EVERY_S``).
    coalesced: bool = False


#: The bridge's calls read KDCube at most once per this many seconds per bundle.
READ_EVERY_S = 3.0
#: How often a waiting push asks again whether the bundle is free.
PUSH_WAIT_STEP_S = 0.1
#: What a name reported by the bridge may hold (KDCube's user names, e-mail addresses).
_REPORTED = re.compile(r"[^A-Za-z0-9_.@+\-]")
REPORTED_MAX = 64


def reported_name(text: str) -> str:
    """A writer's name as reported by the bridge (from KDCube's ``bundles.props.update``
    message), never a verified user: letters, digits and ``_.@+-`` only, at most 64 of them."""
    return _REPORTED.sub("", text or "")[:REPORTED_MAX]


def kdcube_observe(*, source: str, updated_by: str = "") -> Observed:
    """Read the target and compare it with the guard's baseline and the version in force (the
    drift listener, the fallback poll). A stored subtree that moved away from the baseline since
    the last read is recorded in the audit log as an outside change. Raises ``KDCubeError``."""
    target = kdcube_target()
    previous = last_read()
    in_force = version_published()
    seen = _read(target)  # outside any transaction: see kdcube_push
    with transaction.atomic():
        return _observed(target, seen, previous, in_force, source, reported_name(updated_by))


def kdcube_observe_coalesced(*, source: str, updated_by: str = "") -> Observed:
    """:func:`kdcube_observe`, at most once per :data:`READ_EVERY_S` per bundle. A call within
    that time of the last read waits for its end and reads once more (a change written
    meanwhile is not missed); further calls meanwhile are answered by that read (coalesced)."""
    target = kdcube_target()
    label = target.label
    _bundle(label)
    window = timedelta(seconds=READ_EVERY_S)
    now = timezone.now()
    mine = KDCubeBundle.objects.filter(target=label).filter(
        Q(read_at__isnull=True) | Q(read_at__lte=now - window)
    )
    if mine.update(read_at=now):
        return kdcube_observe(source=source, updated_by=updated_by)
    row = KDCubeBundle.objects.get(target=label)
    due = (row.read_at or now) + window
    pending = KDCubeBundle.objects.filter(target=label).filter(
        Q(read_pending_until__isnull=True) | Q(read_pending_until__lt=now)
    )
    if not pending.update(read_pending_until=due + timedelta(seconds=2 * target.timeout_s)):
        return Observed(read=last_read(), outside_change=False, coalesced=True)
    try:
        time.sleep(max(0.0, (due - timezone.now()).total_seconds()))
        KDCubeBundle.objects.filter(target=label).update(read_at=timezone.now())
        return kdcube_observe(source=source, updated_by=updated_by)
    finally:
        KDCubeBundle.objects.filter(target=label).update(read_pending_until=None)


def _observed(
    target: kdcube_client.Target,
    seen: kdcube_props.Target,
    previous: KDCubeRead | None,
    in_force: PolicyVersion | None,
    source: str,
    updated_by: str,
) -> Observed:
    bundle = baseline(target.label)
    found = _changes(bundle, seen, in_force)
    row = _record_read(
        target=target,
        seen=seen,
        source=source,
        in_force=in_force,
        updated_by=updated_by,
        changes=[c.as_dict() for c in found],
        inert=inert_keys(seen),
    )
    new = previous is None or previous.stored_hash != row.stored_hash
    if bundle is not None:
        outside = new and row.stored_hash != bundle.baseline_hash
    else:
        outside = bool(row.differs) and new
    if outside:
        audit_record(
            actor="kdcube",
            action="kdcube.outside-change",
            target=target.label,
            message=config_drift_sentence(row) or "",
            after={
                "changes": row.changes,
                "differs": row.differs,
                "version": row.version,
                "hash": row.stored_hash,
                # Named in KDCube's bundles.props.update message, relayed by the bridge: a
                # report, never a verified user.
                "reported_by": updated_by or None,
            },
        )
    return Observed(read=row, outside_change=outside)


def config_drift_sentence(row: KDCubeRead | None) -> str | None:
    """The config-drift sentence ("changed in KDCube at 10:02 (reported by KDCube as `ana`):
    `main` → connection `web` → `web_search`: strategy [exploration] → [exploitation]"); None
    when there is no config drift."""
    if row is None or not (row.differs or row.changes):
        return None
    who = f" (reported by KDCube as `{row.updated_by}`)" if row.updated_by else ""
    when = f"changed in KDCube at {timezone.localtime(row.at):%H:%M}{who}"
    if row.changes:
        texts = [c.get("text", "") for c in row.changes if isinstance(c, dict)]
        more = len(texts) - 1
        tail = f" (and {more} more)" if more > 0 else ""
        return f"{when}: {texts[0]}{tail}"
    count = len(row.differs)
    what = ", ".join(row.differs[:3]) + ("…" if count > 3 else "")
    verb = "differs" if count == 1 else "differ"
    return f"{when}: {what} {verb} from version {row.version}"


def config_drift_lines(row: KDCubeRead | None) -> list[str]:
    """Every change of the drift, at most 20 lines then "and N more"."""
    if row is None:
        return []
    texts = [str(c.get("text", "")) for c in row.changes if isinstance(c, dict)]
    out = texts[: kdcube_drift.MAX_LINES]
    if len(texts) > kdcube_drift.MAX_LINES:
        out.append(f"and {len(texts) - kdcube_drift.MAX_LINES} more")
    return out


def config_drift() -> KDCubeRead | None:
    """The last read when KDCube's owned subtree moved away from the baseline, or the runtime's
    view differs from the version in force (else None)."""
    row = last_read()
    if row is None:
        return None
    bundle = KDCubeBundle.objects.filter(target=row.target).first()
    if row.changes and (bundle is None or bundle.baseline_hash != row.stored_hash):
        return row
    in_force = version_published()
    if not row.differs or in_force is None or row.version != in_force.number:
        return None
    return row


def push_status(numbers: list[int]) -> dict[int, KDCubePush]:
    """The newest push of each of ``numbers`` (absent: not pushed)."""
    out: dict[int, KDCubePush] = {}
    for row in KDCubePush.objects.filter(version__in=numbers).order_by("-at", "-id"):
        out.setdefault(row.version, row)
    return out


@dataclass(frozen=True)
class TakenIn:
    """A read an import may make the baseline once it is applied (never before)."""

    target: str
    hash: str
    snapshot: Any


@dataclass(frozen=True)
class Pulled:
    text: str
    #: Paths (as people read them) whose value is a secret Traitdeck did not import.
    secrets: list[str]
    read: TakenIn
    #: Keys of the read props the runtime never reads (``key-inert``).
    inert: list[str] = field(default_factory=list)


def kdcube_pull() -> Pulled:
    """The owned subtree the runtime loads (defaults ← props) as a policy file for the import
    preview. Stores nothing: only applying the import takes its read in (:func:`kdcube_take_in`).
    Values outside the owned subtree are never read (but for the react blocks' inert
    ``multi_action_mode`` keys); in credential positions the reference Traitdeck holds (draft,
    version in force) is kept, else the value is shown as "secret, not imported". Raises
    ``KDCubeError``/``KDCubeOff``."""
    from policy.selectors import draft_state

    target = kdcube_target()
    seen = _read(target)
    in_force = version_published()
    known = [kdcube_props.version_subtree(draft_state().data)]
    if in_force is not None:
        known.append(kdcube_props.version_subtree(version_data(in_force)))
    subtree, secrets = kdcube_props.pulled_subtree(seen.effective or {}, *known)
    text = yaml.safe_dump(
        {"surfaces": {"as_consumer": subtree}}, sort_keys=False, allow_unicode=True
    )
    read = TakenIn(target=target.label, hash=_hash(seen), snapshot=_snapshot(seen))
    return Pulled(text=text, secrets=secrets, read=read, inert=inert_keys(seen))


def kdcube_take_in(read: TakenIn) -> bool:
    """An import from KDCube was applied: its read becomes the guard's baseline (False when the
    target changed since it was read)."""
    if not kdcube_configured() or read.target != kdcube_target().label:
        return False
    KDCubeBundle.objects.update_or_create(
        target=read.target,
        defaults={
            "baseline_hash": read.hash,
            "baseline": read.snapshot,
            "baseline_source": "import",
            "baseline_version": None,
            "baseline_at": timezone.now(),
        },
    )
    return True


_CARRY_SALT = "traitdeck.kdcube.read"
#: How long an import preview's read may be applied.
CARRY_MAX_AGE_S = 24 * 3600


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def carry_read(read: TakenIn, text: str) -> str:
    """The preview's read, signed for its Apply form and bound to the previewed text."""
    payload = {"t": read.target, "h": read.hash, "s": read.snapshot, "x": _text_digest(text)}
    return signing.dumps(payload, salt=_CARRY_SALT, compress=True)


def carried_read(token: str, text: str) -> TakenIn | None:
    """The read an Apply form carried (``None``: none, forged, too old, or another text)."""
    if not token:
        return None
    try:
        payload = signing.loads(token, salt=_CARRY_SALT, max_age=CARRY_MAX_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(payload, dict) or payload.get("x") != _text_digest(text):
        return None
    return TakenIn(
        target=str(payload.get("t")), hash=str(payload.get("h")), snapshot=payload.get("s")
    )
