"""Write side of the policy app: every change to the draft goes through ``draft_change``.

A change names the revision it was based on; a change based on an older revision is refused
with ``StaleRevision`` and changes nothing (DESIGN §6 "Draft revision").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from policy.domain.edits import EditError
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


@transaction.atomic
def draft_change(*, edit: Edit, base_revision: int | None, user: Any = None) -> DraftState:
    """Apply ``edit`` to the draft document and store the result as the next revision.

    ``base_revision`` None applies to whatever the current draft is (API calls without
    ``If-Match``). The row lock makes concurrent changes queue instead of overwriting.
    """
    draft = PolicyDraft.objects.select_for_update().filter(pk=PolicyDraft.SINGLETON_ID).first()
    current = draft.revision if draft else 0
    if base_revision is not None and base_revision != current:
        raise StaleRevision(base_revision, current)
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
def manifest_upload(*, agent: str, data: Any, user: Any = None) -> AgentManifest:
    """Store an agent's manifest; raises ``ManifestError`` (a ValueError) when malformed."""
    parse_manifest(data)
    row, _ = AgentManifest.objects.update_or_create(
        agent=agent, defaults={"data": data, "uploaded_by": _user(user)}
    )
    return row


def manifest_remove(*, agent: str) -> bool:
    deleted, _ = AgentManifest.objects.filter(agent=agent).delete()
    return deleted > 0


def manifest_rename(*, old: str, new: str) -> None:
    AgentManifest.objects.filter(agent=old).update(agent=new)
