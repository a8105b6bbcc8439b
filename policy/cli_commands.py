"""The one definition of Traitdeck's two command lines: their commands and options, as tables.

``traitdeck`` (the console script, ``policy.cli``) reads policy files without a server:
:data:`FILE_COMMANDS`. ``manage.py policy`` (``pages/management/commands/policy.py``) works on
the draft and its versions in the database: :data:`DRAFT_COMMANDS`. Both build their parsers with
:func:`add_commands`, so an option is spelled once and a command cannot drift from its twin
(``--bundle``, ``--yes``, ``--version N``…). No Django here: the console script needs none.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.multi_action import CATALOG_DETAILS
from engine.round.react_version import REACT_VERSIONS
from engine.traits.builtins import DEFAULT_ROLE, ROLES
from policy.domain.yaml_io import CLI_MAX_BYTES


@dataclass(frozen=True)
class Option:
    """One argument: argparse's flags (or the positional's name) and keywords."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def option(*flags: str, **kwargs: Any) -> Option:
    return Option(flags, kwargs)


@dataclass(frozen=True)
class OneOf:
    """Options of which a command takes at most one."""

    options: tuple[Option, ...]


@dataclass(frozen=True)
class Command:
    """A command: its name, its one-line help, its own options in ``--help`` order.
    ``reads_file``: it takes a policy FILE first, with ``--manifest``, ``--bundle`` and
    ``--max-bytes`` (and ``--format`` when ``formats``); ``audited``: it changes something, so it
    takes ``--actor`` last (the audit log names who ran it)."""

    name: str
    help: str
    options: tuple[Option | OneOf, ...] = ()
    reads_file: bool = False
    formats: bool = False
    audited: bool = False


def positive_int(value: str) -> int:
    """An argparse type for counts and limits: a whole number, at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not at least 1")
    return number


# --- options more than one command takes -------------------------------------------------------

POLICY_FILE = (
    option("file", metavar="FILE", help="policy YAML ('-' reads standard input)"),
    option("--manifest", metavar="M.json", help="tools discovered in code (JSON)"),
    option(
        "--bundle",
        metavar="ID",
        help="when FILE is a KDCube bundles descriptor: the bundle whose props to read "
        "(default: the only one carrying a policy)",
    ),
    option(
        "--max-bytes",
        type=positive_int,
        default=CLI_MAX_BYTES,
        metavar="N",
        help=f"refuse larger input files (default {CLI_MAX_BYTES})",
    ),
)
FORMAT = option("--format", choices=["text", "json"], default="text")
AGENT = option("--agent", required=True)
ROLE = option(
    "--role",
    choices=ROLES,
    default=DEFAULT_ROLE,
    help="the agent's role at run time, which decides the built-ins: parent (can delegate: "
    "react.delegate), child (a sub-agent: react.contribute), none (default: parent)",
)
REACT_VERSION = option(
    "--react-version",
    choices=REACT_VERSIONS,
    help="the react agent the runtime runs (KDCube's default v2, or v3); a round's own "
    "react_version wins; default: TRAITDECK_REACT_AGENT_VERSION, else v2",
)


def _multi_action_mode(help_text: str) -> Option:
    return option("--multi-action-mode", metavar="MODE", help=help_text)


# --- traitdeck: policy files --------------------------------------------------------------------

FILE_COMMANDS: tuple[Command, ...] = (
    Command(
        "validate",
        "Print every diagnostic; exit 1 when there are errors.",
        reads_file=True,
        formats=True,
    ),
    Command(
        "effective",
        "Effective traits of an agent's tools.",
        (AGENT, ROLE),
        reads_file=True,
        formats=True,
    ),
    Command(
        "catalog",
        "The tool catalog text the model will read.",
        (
            AGENT,
            ROLE,
            option("--tool", metavar="ID", help="only this model-facing tool id"),
            option("--no-builtins", action="store_true", help="leave out the react.* tools"),
            option(
                "--detail",
                choices=CATALOG_DETAILS,
                help="the runtime's form to render (default: the one that applies to the agent "
                "when the end user picks none: its default instruction profile's or react "
                "block's tool_catalog_detail, else full)",
            ),
        ),
        reads_file=True,
    ),
    Command(
        "dry-run",
        "Run a round through the overseer, early gate and ledger.",
        (
            AGENT,
            ROLE,
            option("--round", required=True, metavar="R.json", help="the round to run (JSON)"),
            _multi_action_mode(
                "the runtime's multi_action_mode (on/true/1/yes/safe_fanout/fanout mean on, any "
                "other string off); the round file's own mode wins"
            ),
            option(
                "--profile",
                metavar="ID",
                help="the instruction profile whose multi_action_mode applies "
                "(default: the agent's instruction_profiles.default)",
            ),
            REACT_VERSION,
        ),
        reads_file=True,
        formats=True,
    ),
    Command("fmt", "Print the policy in Traitdeck's canonical export form.", reads_file=True),
    Command(
        "export",
        "Write the policy into a KDCube bundles descriptor, changing only the policy's lines "
        "(comments, quoting, key order and blank lines stay); prints it unless --in-place.",
        (
            option(
                "--into",
                required=True,
                metavar="bundles.yaml",
                help="the KDCube bundles descriptor",
            ),
            option(
                "--in-place",
                action="store_true",
                help="rewrite the descriptor instead of printing it",
            ),
        ),
        reads_file=True,
    ),
    Command(
        "replay",
        "Replay recorded rounds under the policy: with --against, what changes from OTHER to "
        "FILE (newly rejected, early starts and dedups gained or lost); without, what FILE "
        "predicts for them.",
        (
            option(
                "--rounds",
                required=True,
                metavar="ROUNDS.jsonl",
                help="one recorded round per line: a dry-run round (as dry-run --round) plus the "
                "\"agent\" it ran as ('-' reads standard input)",
            ),
            option("--against", metavar="OTHER", help="the baseline policy YAML"),
            option(
                "--against-bundle",
                metavar="ID",
                help="when OTHER is a bundles descriptor: the bundle whose props to read",
            ),
            _multi_action_mode(
                "for rounds that did not record one, instead of each agent's default profile's"
            ),
            ROLE,
            REACT_VERSION,
        ),
        reads_file=True,
        formats=True,
    ),
    Command(
        "test",
        "Run a regression suite (SUITE.yaml: cases with the verdicts each round must get) under "
        "the policy; exit 1 when a case fails.",
        (
            option("suite", metavar="SUITE.yaml", help="the suite (cases of one agent)"),
            _multi_action_mode(
                "for cases whose round sets none, instead of the agent's default profile's"
            ),
            ROLE,
            REACT_VERSION,
        ),
        reads_file=True,
        formats=True,
    ),
    Command(
        "manifest",
        "Import each python connection's module (or ref) as the runtime does and print the "
        "manifest JSON (tools, descriptions, parameters, intrinsic traits); exit 1 naming the "
        "connections whose module fails to import.",
        (
            AGENT,
            option(
                "--bundle-root",
                metavar="DIR",
                help="resolve relative ref paths against this directory",
            ),
            option(
                "--python-path",
                metavar="DIR",
                action="append",
                default=[],
                help="put DIR on sys.path before importing (repeatable)",
            ),
        ),
        reads_file=True,
    ),
)

# --- manage.py policy: the draft and its versions -----------------------------------------------

DRAFT_COMMANDS: tuple[Command, ...] = (
    Command(
        "import",
        "replace the draft with FILE ('-': standard input)",
        (
            option("file", metavar="FILE"),
            option(
                "--bundle",
                metavar="ID",
                help="when FILE is a KDCube bundles descriptor: the bundle whose props to import "
                "(default: the only one carrying a policy)",
            ),
            option("--publish", action="store_true", help="publish it as the next version"),
            option("--message", help="the version's message (required with --publish)"),
            option(
                "--yes",
                action="store_true",
                help="publish although it has warnings (never errors)",
            ),
        ),
        audited=True,
    ),
    Command(
        "export",
        "print the version in force (default), or another",
        (
            OneOf(
                (
                    option("--draft", action="store_true", help="the draft instead"),
                    option("--version", type=int, metavar="N", help="version N instead"),
                )
            ),
        ),
    ),
    Command(
        "publish",
        "publish the draft as the next version",
        (
            option("--message", required=True, help="what changes and why"),
            option("--yes", action="store_true", help="publish although it has warnings"),
            option(
                "--override-failing-cases",
                action="store_true",
                help="publish although regression cases fail (the audit log records it)",
            ),
            option(
                "--if-unpublished",
                action="store_true",
                help="do nothing (exit 0) when a version exists already (for scripts like the "
                "demo)",
            ),
        ),
        audited=True,
    ),
    Command(
        "push",
        "write a version into the KDCube bundle's props",
        (
            option("--version", type=int, metavar="N", help="version N (default: in force)"),
            option(
                "--overwrite",
                action="store_true",
                help="overwrite KDCube's subtree although it changed since Traitdeck read it",
            ),
        ),
        audited=True,
    ),
    Command(
        "pull",
        "import the KDCube bundle's policy into the draft",
        (option("--yes", action="store_true", help="apply (without it: preview only)"),),
        audited=True,
    ),
)


def add_commands(
    sub: Any,
    commands: Sequence[Command],
    *,
    describe: bool,
    actor: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Add ``commands`` to ``sub`` (what ``add_subparsers`` returned). ``describe``: each
    command's ``--help`` repeats its help line as the description; ``actor`` adds ``--actor``
    to the audited commands (the audit app words it)."""
    for command in commands:
        extra = {"description": command.help} if describe else {}
        parser: argparse.ArgumentParser = sub.add_parser(command.name, help=command.help, **extra)
        head = (*POLICY_FILE, *((FORMAT,) if command.formats else ())) if command.reads_file else ()
        for item in (*head, *command.options):
            if isinstance(item, OneOf):
                group = parser.add_mutually_exclusive_group()
                for one in item.options:
                    group.add_argument(*one.flags, **one.kwargs)
            else:
                parser.add_argument(*item.flags, **item.kwargs)
        if command.audited and actor is not None:
            actor(parser)
