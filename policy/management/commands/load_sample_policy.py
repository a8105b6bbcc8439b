"""``load_sample_policy``: the sample policy into an EMPTY draft (never over an admin's work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import add_actor_argument, cli_actor
from policy.audit_notes import policy_replaced
from policy.domain.yaml_io import CLI_MAX_BYTES, load_policy
from policy.selectors import draft_state
from policy.services import draft_replace

SAMPLE = Path(__file__).resolve().parents[2] / "sample" / "sample-policy.yaml"


class Command(BaseCommand):
    help = "Load the sample policy when the draft is still empty (revision 0, no agents)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        state = draft_state()
        if state.revision != 0 or state.agents:
            self.stdout.write(
                f"draft already has content (revision {state.revision}); sample not loaded"
            )
            return
        loaded = load_policy(SAMPLE.read_bytes(), max_bytes=CLI_MAX_BYTES)
        if loaded.refused:  # a broken sample is our bug: say so loudly
            raise CommandError(f"the sample policy {SAMPLE} cannot be loaded", returncode=1)
        new = draft_replace(
            data=loaded.data,
            base_revision=0,
            user=cli_actor(options["actor"]),
            audit=policy_replaced(message="the sample policy"),
            uncapped=True,
        )
        self.stdout.write(f"loaded the sample policy into the draft (revision {new.revision})")
