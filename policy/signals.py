"""What the policy app announces, for the apps above it to act on without policy importing them.

``policy_published``: a version was published or rolled back to (``version``: the new
:class:`~policy.models.PolicyVersion`, ``actor``); sent inside the publishing transaction, so a
receiver that acts on the committed version uses ``transaction.on_commit``. The KDCube app pushes
it to the runtime (``kdcube.receivers``).

``draft_imported``: an import the admin previewed was applied to the draft (``carried``: the
opaque token the preview's Apply form carried, ``""`` when none; ``text``: the imported text as
previewed). The KDCube app takes in the bundle read a KDCube preview carried.
"""

from __future__ import annotations

from django.dispatch import Signal

policy_published = Signal()
draft_imported = Signal()
