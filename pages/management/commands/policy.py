"""``policy import|export|publish``: the draft and its versions from the shell (GitOps).

Exit codes (DESIGN §6): 0 done; 1 the answer is negative (text refused by the import rule, a
publish blocked by errors or with nothing to publish, nothing published, an unknown version or
``--bundle``); 2 the command could not run as asked (usage, ``--publish`` without ``--message``,
an unreadable file, a bundles descriptor with no bundle to choose or several and none named).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import add_actor_argument, cli_actor
from kdcube.client import KDCubeError
from kdcube.services import KDCubeOff, inert_diagnostics, kdcube_pull, kdcube_push, kdcube_take_in
from policy.cli_commands import DRAFT_COMMANDS, add_commands
from policy.domain.descriptors import DescriptorError
from policy.domain.yaml_io import CLI_MAX_BYTES
from policy.importing import import_preview
from policy.selectors import draft_state
from policy.services import draft_replace
from policy.versions import (
    ConfirmationNeeded,
    PublishRefused,
    SuitesFailing,
    policy_publish,
    version_get,
    version_published,
    version_text,
)


class Command(BaseCommand):
    help = "Import into the draft (optionally publishing), export the draft or a version, publish."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, parser_class=CommandParser)
        add_commands(sub, DRAFT_COMMANDS, describe=False, actor=add_actor_argument)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "export":
            self._export(options)
        elif action == "import":
            self._import(options)
        elif action == "push":
            self._push(options)
        elif action == "pull":
            self._pull(options)
        else:
            in_force = version_published()
            if options["if_unpublished"] and in_force is not None:
                self.stdout.write(f"version {in_force.number} is in force; nothing done")
                return
            self._publish(options)

    def _export(self, options: dict[str, Any]) -> None:
        if options["draft"]:
            self.stdout.write(draft_state().text, ending="")
            return
        number = options["version"]
        found = version_get(number) if number is not None else version_published()
        if found is None:
            what = f"there is no version {number}" if number is not None else "nothing is published"
            raise CommandError(what, returncode=1)
        self.stdout.write(version_text(found), ending="")

    def _import(self, options: dict[str, Any]) -> None:
        if options["publish"] and not (options["message"] or "").strip():
            raise CommandError("--publish needs --message", returncode=2)
        text = self._read(options["file"])
        # Like the traitdeck CLI, commands have no size caps (they are the web's).
        try:
            preview = import_preview(
                text, max_bytes=CLI_MAX_BYTES, uncapped=True, bundle=options["bundle"]
            )
        except DescriptorError as exc:
            raise CommandError(f"{exc}; nothing was changed", returncode=exc.exit_code) from None
        for diagnostic in preview.analysis.diagnostics:
            self.stderr.write(diagnostic.as_text())
        if preview.refused:
            raise CommandError("the text cannot be imported; nothing was changed", returncode=1)
        actor = cli_actor(options["actor"])
        if options["publish"] and preview.analysis.has_errors:
            raise CommandError(
                "the policy has errors, which block publishing; nothing was changed", returncode=1
            )
        state = draft_replace(data=preview.data, base_revision=None, user=actor, uncapped=True)
        self.stdout.write(f"imported into the draft (revision {state.revision})")
        if options["publish"]:
            self._publish(options)

    def _publish(self, options: dict[str, Any]) -> None:
        try:
            created = policy_publish(
                actor=cli_actor(options["actor"]),
                message=options["message"] or "",
                confirm_warnings=options["yes"],
                override_failing_cases=options.get("override_failing_cases", False),
            )
        except SuitesFailing as exc:
            failing = "".join(f"\n  {line}" for line in exc.failing)
            raise CommandError(
                f"{exc} (pass --override-failing-cases){failing}", returncode=1
            ) from None
        except ConfirmationNeeded as exc:
            raise CommandError(f"{exc} (pass --yes)", returncode=1) from None
        except PublishRefused as exc:
            raise CommandError(str(exc), returncode=1) from None
        self.stdout.write(f"published version {created.number} ({created.sha256})")

    def _push(self, options: dict[str, Any]) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request is noise
        try:
            row = kdcube_push(
                actor=cli_actor(options["actor"]),
                number=options["version"],
                overwrite=options["overwrite"],
            )
        except KDCubeOff as exc:
            raise CommandError(str(exc), returncode=2) from None
        except LookupError as exc:
            raise CommandError(str(exc).rstrip("."), returncode=1) from None
        if row.status != "pushed":
            raise CommandError(f"version {row.version} {row.status}: {row.answer}", returncode=1)
        self.stdout.write(f"pushed version {row.version} to {row.target} (hash {row.subtree_hash})")

    def _pull(self, options: dict[str, Any]) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)
        try:
            pulled = kdcube_pull()
        except KDCubeOff as exc:
            raise CommandError(str(exc), returncode=2) from None
        except KDCubeError as exc:
            raise CommandError(str(exc), returncode=1) from None
        preview = import_preview(pulled.text, max_bytes=CLI_MAX_BYTES, uncapped=True)
        for path in pulled.secrets:
            self.stderr.write(f"{path}: secret, not imported (put its env:/file: reference there)")
        for diagnostic in [*preview.analysis.diagnostics, *inert_diagnostics(pulled.inert)]:
            self.stderr.write(diagnostic.as_text())
        if preview.refused:
            raise CommandError("KDCube's props cannot be imported; nothing changed", returncode=1)
        self.stdout.write(preview.diff or "no change against the draft\n", ending="")
        if not options["yes"]:
            self.stdout.write("preview only: pass --yes to import it into the draft")
            return
        actor = cli_actor(options["actor"])
        state = draft_replace(data=preview.data, base_revision=None, user=actor, uncapped=True)
        kdcube_take_in(pulled.read)  # applied: its read is what the next push compares with
        self.stdout.write(f"imported from KDCube into the draft (revision {state.revision})")

    def _read(self, name: str) -> bytes:
        try:
            if name == "-":
                return sys.stdin.buffer.read(CLI_MAX_BYTES + 1)
            return Path(name).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror or exc}", returncode=2) from None
