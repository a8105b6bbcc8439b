"""Write side of the policy app: every change to the draft goes through ``draft_change``.

A change names the revision it was based on; a change based on an older revision is refused
with ``StaleRevision`` and changes nothing (DESIGN §6 "Draft revision").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from policy.domain.edits import EditError, check_agent_name, remove_agent, rename_agent
from policy.domain.manifest import parse_manifest
from policy.domain.yaml_io import CLI_MAX_BYTES, dump_body, load_policy
from policy.models import AgentManifest, PolicyDraft
from policy.selectors import DraftState, draft_state

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


def _user(user: Any) -> User | None:
    return user if isinstance(user, User) and user.is_authenticated else None


def _locked_draft(base_revision: int | None) -> tuple[PolicyDraft | None, int]:
    """The draft row (locked until the transaction ends) and its revision; raises
    ``StaleRevision`` when ``base_revision`` is given and is not the current one."""
    draft = PolicyDraft.objects.select_for_update().filter(pk=PolicyDraft.SINGLETON_ID).first()
    current = draft.revision if draft else 0
    if base_revision is not None and base_revision != current:
        raise StaleRevision(base_revision, current)
    return draft, current


@transaction.atomic
def draft_change(*, edit: Edit, base_revision: int | None, user: Any = None) -> DraftState:
    """Apply ``edit`` to the draft document and store the result as the next revision.

    ``base_revision`` None applies to whatever the current draft is (API calls without
    ``If-Match``). The row lock makes concurrent changes queue instead of overwriting.
    """
    draft, current = _locked_draft(base_revision)
    state = draft_state()
    try:
        new_data = edit(state.data)
    except EditError as exc:
        raise EditRefused(str(exc)) from exc
    body = dump_body(new_data)
    # Refuse to store anything the loader would not read back: the draft must stay importable.
    reloaded = load_policy(body, max_bytes=CLI_MAX_BYTES)
    if reloaded.refused:
        raise EditRefused("that change would make the policy unreadable; nothing was saved")
    if draft is None:
        draft = PolicyDraft(pk=PolicyDraft.SINGLETON_ID)
    draft.body = body
    draft.revision = current + 1
    draft.updated_by = _user(user)
    draft.save()
    return draft_state()


def draft_replace(
    *, data: dict[str, Any], base_revision: int | None, user: Any = None
) -> DraftState:
    """Replace the whole draft (an applied import)."""
    return draft_change(edit=lambda _old: data, base_revision=base_revision, user=user)


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
        edit=lambda doc: rename_agent(doc, agent, new_name), base_revision=base_revision, user=user
    )
    if new_name != agent:
        # A manifest left under the new name (its agent removed by an import) is not this
        # agent's: the renamed agent keeps its own manifest, or none.
        manifest_remove(agent=new_name)
        manifest_rename(old=agent, new=new_name)
    return state


@transaction.atomic
def agent_remove(*, agent: str, base_revision: int | None, user: Any = None) -> DraftState:
    """Remove an agent and its manifest."""
    state = draft_change(
        edit=lambda doc: remove_agent(doc, agent), base_revision=base_revision, user=user
    )
    manifest_remove(agent=agent)
    return state


@transaction.atomic
def manifest_upload(
    *, agent: str, data: Any, user: Any = None, base_revision: int | None = None
) -> AgentManifest:
    """Store an agent's manifest; raises ``ManifestError`` (a ValueError) when malformed.

    A manifest is not part of the draft document (its revision does not change), but with
    ``base_revision`` the upload is refused (``StaleRevision``) when the draft moved on."""
    if base_revision is not None:
        _locked_draft(base_revision)
    parse_manifest(data)
    row, _ = AgentManifest.objects.update_or_create(
        agent=agent, defaults={"data": data, "uploaded_by": _user(user)}
    )
    return row


@transaction.atomic
def manifest_remove(*, agent: str, base_revision: int | None = None) -> bool:
    """Remove an agent's manifest; ``False`` when it had none. ``base_revision`` as for
    :func:`manifest_upload`."""
    if base_revision is not None:
        _locked_draft(base_revision)
    deleted, _ = AgentManifest.objects.filter(agent=agent).delete()
    return deleted > 0


def manifest_rename(*, old: str, new: str) -> None:
    AgentManifest.objects.filter(agent=old).update(agent=new)
