"""Write side of the policy app: every change to the draft goes through ``draft_change``.

A change names the revision it was based on; a change based on an older revision is refused
with ``StaleRevision`` and changes nothing (DESIGN §6 "Draft revision").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from audit.services import audit_record
from core.numbers import BOUND_TEXT, find_unbounded
from core.text import find_nul, show_path, unencodable_path
from engine.document.diagnostics import Diagnostic
from engine.tools.manifest import parse_manifest
from policy.audit_notes import (
    DRAFT_EDITED,
    MANIFEST_REMOVE,
    MANIFEST_UPLOAD,
    AuditNote,
    agent_removed,
    agent_renamed,
    policy_replaced,
)
from policy.caps import web_caps
from policy.domain.caps import CODE as CAPS_CODE
from policy.domain.caps import over_caps
from policy.domain.edits import EditError, check_agent_name, remove_agent, rename_agent
from policy.domain.yaml_io import CLI_MAX_BYTES, dump_body, export_of_body, load_policy
from policy.models import AgentManifest, PolicyDraft
from policy.selectors import DraftState, draft_analysis, draft_state, remember_draft

Edit = Callable[[dict[str, Any]], dict[str, Any]]


class StaleRevision(Exception):
    """The change was based on an older revision than the draft's."""

    def __init__(self, base: int, current: int) -> None:
        self.base = base
        self.current = current
        super().__init__(
            f"The draft changed since you loaded it (you edited revision {base}, it is now at"
            f" revision {current}). Nothing was saved: reload to see the current draft, then"
            " redo your change."
        )


class EditRefused(Exception):
    """The edit cannot apply (unknown agent, taken name…): a plain sentence for the user."""


class PolicyTooLarge(EditRefused):
    """The change would take the policy over one of the web's caps (``policy-too-large``)."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        reasons = "; ".join(d.message for d in diagnostics)
        super().__init__(f"the change is refused ({CAPS_CODE}): {reasons}; nothing was saved")


def _refuse_unstorable(data: Any, *, root: str) -> None:
    """Every way into the draft and the manifests (forms, API, import) ends here: what no page
    could show, or no database store, is refused before anything is written."""
    where = unencodable_path(data, root=root)
    if where is not None:
        raise EditRefused(
            f"{where} holds text that cannot be encoded as UTF-8 (a lone surrogate); nothing was"
            " saved"
        )
    nul = find_nul(data)
    if nul is not None:
        # Valid UTF-8, but PostgreSQL cannot store it (SQLite can: refused on both alike).
        raise EditRefused(f"{show_path(nul[0]) or root} holds a NUL character; nothing was saved")
    huge = find_unbounded(data)
    if huge is not None:
        raise EditRefused(f"{show_path(huge) or root} is too large a number: {BOUND_TEXT}")


def _check_readable() -> None:
    """Validate the draft as just written, inside the write's transaction: the same analysis
    every page shows (and caches), so a change that would break it raises here and is rolled
    back with everything else the write did — audit entry included — instead of being
    committed and breaking the pages afterwards."""
    draft_analysis()


def signed_in_user(user: Any) -> User | None:
    """The signed-in user to record as author, or ``None`` (anonymous, a command, a token)."""
    return user if isinstance(user, User) and user.is_authenticated else None


def locked_draft(base_revision: int | None) -> tuple[PolicyDraft | None, int]:
    """The draft row (locked until the transaction ends) and its revision; raises
    ``StaleRevision`` when ``base_revision`` is given and is not the current one."""
    draft = PolicyDraft.objects.select_for_update().filter(pk=PolicyDraft.SINGLETON_ID).first()
    current = draft.revision if draft else 0
    if base_revision is not None and base_revision != current:
        raise StaleRevision(base_revision, current)
    return draft, current


@transaction.atomic
def draft_change(
    *,
    edit: Edit,
    base_revision: int | None,
    user: Any = None,
    audit: AuditNote | None = None,
    uncapped: bool = False,
) -> DraftState:
    """Apply ``edit`` to the draft document and store the result as the next revision.

    ``base_revision`` None applies to whatever the current draft is (API calls without
    ``If-Match``). The row lock makes concurrent changes queue instead of overwriting.
    Records one audit entry as ``audit`` describes it (without one: the whole policy before
    and after, as ``draft.edit``). A change over the web's caps raises ``PolicyTooLarge``
    unless ``uncapped`` (management commands, which like the CLI have no caps).
    """
    draft, current = locked_draft(base_revision)
    state = draft_state()
    try:
        new_data = edit(state.data)
    except EditError as exc:
        raise EditRefused(str(exc)) from exc
    _refuse_unstorable(new_data, root="the policy")
    if not uncapped:
        over = over_caps(new_data, web_caps(), before=state.data)
        if over:
            raise PolicyTooLarge(over)
    body = dump_body(new_data)
    # Refuse to store anything the loader would not read back: the draft must stay importable.
    # Read back as exported (header and body), so this one reading also serves every page that
    # shows the new draft and its diagnostics (``remember_draft``).
    text = export_of_body(body)
    reloaded = load_policy(text, max_bytes=CLI_MAX_BYTES)
    if reloaded.refused:
        raise EditRefused("that change would make the policy unreadable; nothing was saved")
    if draft is None:
        draft = PolicyDraft(pk=PolicyDraft.SINGLETON_ID)
    draft.body = body
    draft.revision = current + 1
    draft.updated_by = signed_in_user(user)
    draft.save()
    remember_draft(body, text, reloaded)
    _check_readable()
    note = audit or DRAFT_EDITED
    before, after = note.before_after(state.data, new_data)
    audit_record(
        actor=user,
        action=note.action,
        target=note.target,
        message=note.message,
        before=before,
        after=after,
        ref=note.ref,
    )
    return draft_state()


def draft_replace(
    *,
    data: dict[str, Any],
    base_revision: int | None,
    user: Any = None,
    audit: AuditNote | None = None,
    uncapped: bool = False,
) -> DraftState:
    """Replace the whole draft (an applied import, unless ``audit`` says otherwise)."""
    return draft_change(
        edit=lambda _old: data,
        base_revision=base_revision,
        user=user,
        audit=audit or policy_replaced(),
        uncapped=uncapped,
    )


@transaction.atomic
def agent_rename(
    *, agent: str, new_name: str, base_revision: int | None, user: Any = None
) -> DraftState:
    """Rename an agent; its manifest follows in the same transaction, so the draft and the
    manifests never disagree about the agent's name."""
    try:
        new_name = check_agent_name(new_name)
    except EditError as exc:
        raise EditRefused(str(exc)) from exc
    state = draft_change(
        edit=lambda doc: rename_agent(doc, agent, new_name),
        base_revision=base_revision,
        user=user,
        audit=agent_renamed(agent, new_name),
    )
    if new_name != agent:
        # A manifest left under the new name (its agent removed by an import) is not this
        # agent's: the renamed agent keeps its own manifest, or none.
        _manifest_delete(agent=new_name)
        manifest_rename(old=agent, new=new_name)
    return state


@transaction.atomic
def agent_remove(*, agent: str, base_revision: int | None, user: Any = None) -> DraftState:
    """Remove an agent and its manifest."""
    state = draft_change(
        edit=lambda doc: remove_agent(doc, agent),
        base_revision=base_revision,
        user=user,
        audit=agent_removed(agent),
    )
    _manifest_delete(agent=agent)
    return state


@transaction.atomic
def manifest_upload(
    *, agent: str, data: Any, user: Any = None, base_revision: int | None = None
) -> AgentManifest:
    """Store an agent's manifest; raises ``ManifestError`` (a ValueError) when malformed.

    A manifest is not part of the draft document, but it changes what the draft means (the
    effective traits), so it is a change like any other: the draft's revision grows, and with
    ``base_revision`` a stale upload is refused (``StaleRevision``) and changes nothing. The
    manifest already stored, uploaded again, changes nothing either."""
    draft, current = locked_draft(base_revision)
    _refuse_unstorable(data, root="the manifest")
    parse_manifest(data)
    stored = AgentManifest.objects.filter(agent=agent).first()
    if stored is not None and stored.data == data:
        # The same manifest again (a runtime re-announcing its tools): nothing changes, so no
        # revision bump (other editors' forms stay current) and no audit entry.
        return stored
    old = stored.data if stored is not None else None
    bump_revision(draft, current, user)
    row, _ = AgentManifest.objects.update_or_create(
        agent=agent, defaults={"data": data, "uploaded_by": signed_in_user(user)}
    )
    audit_record(
        actor=user,
        action=MANIFEST_UPLOAD,
        target=f"manifest {agent}",
        before=old,
        after=data,
        ref={"agent": agent},
    )
    _check_readable()
    return row


@transaction.atomic
def manifest_remove(*, agent: str, base_revision: int | None = None, user: Any = None) -> bool:
    """Remove an agent's manifest; ``False`` when it had none (then the revision stays).
    ``base_revision`` and the revision as for :func:`manifest_upload`."""
    draft, current = locked_draft(base_revision)
    old = AgentManifest.objects.filter(agent=agent).values_list("data", flat=True).first()
    if not _manifest_delete(agent=agent):
        return False
    bump_revision(draft, current, user)
    audit_record(
        actor=user,
        action=MANIFEST_REMOVE,
        target=f"manifest {agent}",
        before=old,
        ref={"agent": agent},
    )
    return True


def bump_revision(draft: PolicyDraft | None, current: int, user: Any) -> None:
    """Store the locked draft as the next revision, its document unchanged (a manifest
    change: forms and ``If-Match`` based on the old revision are now stale)."""
    if draft is None:
        draft = PolicyDraft(pk=PolicyDraft.SINGLETON_ID, body=dump_body(draft_state().data))
    draft.revision = current + 1
    draft.updated_by = signed_in_user(user)
    draft.save()


def _manifest_delete(*, agent: str) -> bool:
    """Delete without an audit entry of its own (part of an agent's rename or removal)."""
    deleted, _ = AgentManifest.objects.filter(agent=agent).delete()
    return deleted > 0


def manifest_rename(*, old: str, new: str) -> None:
    AgentManifest.objects.filter(agent=old).update(agent=new)


@transaction.atomic
def draft_lock(*, base_revision: int | None) -> DraftState:
    """The current draft, its row locked until the caller's transaction ends (publishing reads
    a draft that no edit can change underneath it); ``StaleRevision`` as for ``draft_change``."""
    locked_draft(base_revision)
    return draft_state()
