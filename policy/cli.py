"""``traitdeck``: validate, inspect and dry-run a policy file without a server or a database.

The shell of the CLI (argparse, the environment, stdin and files): every answer it prints is
computed by ``policy.domain``. It imports no Django, so the console script runs without a
settings module (the layer contract and ``tests/policy/domain/test_import_boundary.py`` hold it).

Exit codes (DESIGN §6): 0 done and the policy has no errors; 1 the policy has errors (output is
still printed, computed as the runtime would) or the agent/tool does not exist; 2 the command
could not run as asked (usage, unreadable or oversized file, malformed round or manifest).

Over 500 lines on purpose: one console script, its commands in ``--help`` order, sharing the
reading of files and the exit-code mapping; each command's logic lives in ``policy.domain``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from core.text import counted
from engine.catalog.catalog import COMPACT_OMITS, CatalogPreview, catalog_preview
from engine.catalog.multi_action import (
    ModeSources,
    agent_presentation,
    multi_action_mode,
    profile_mode,
)
from engine.document.diagnostics import Diagnostic
from engine.document.jsonable import json_text, jsonable
from engine.replay.draft_impact import (
    ModeFor,
    RecordedRound,
    RecordedRoundError,
    Resolver,
    describe_report,
    parse_recorded_round,
    predict,
    prediction_summary,
    replay,
    version_line,
)
from engine.round.dryrun import RoundSpecError, describe, dry_run, parse_round_spec
from engine.round.react_version import VersionSources, react_version
from engine.tools.agent_run import AgentRun, agent_run
from engine.tools.manifest import Manifest, ManifestError, parse_manifest
from engine.tools.resolution import (
    AgentResolution,
    UnknownAgentError,
    effective_json,
)
from policy.cli_commands import FILE_COMMANDS, add_commands
from policy.domain.analysis import Analysis, analyze_text
from policy.domain.descriptor_write import ExportRefused, export_into_descriptor
from policy.domain.descriptors import DescriptorError
from policy.domain.suites import SuiteError, load_suite, run_suite
from policy.domain.suites import summary as suite_summary
from policy.domain.validation.tools_unknown import render_unseen, unseen_tools
from policy.domain.yaml_io import export_text

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """The command cannot run as asked: exit 2 with one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One clear line, not argparse's usage block: scripts read stderr.
        self.exit(EXIT_USAGE, f"traitdeck: {message} (see 'traitdeck --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="traitdeck",
        description="Check a tool-trait policy the way the agent runtime will read it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_commands(sub, FILE_COMMANDS, describe=True)
    return parser


def _read(path: str, max_bytes: int, what: str) -> bytes:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            file = Path(path)
            if file.is_file() and file.stat().st_size > max_bytes:
                raise UsageError(f"{what} {path} is over the limit of {max_bytes} bytes")
            data = file.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:
        raise UsageError(f"{what} {path} is over the limit of {max_bytes} bytes")
    return data


def _read_json(path: str, max_bytes: int, what: str) -> Any:
    raw = _read(path, max_bytes, what)
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{what} {path} is not valid JSON: {exc}") from exc
    except RecursionError:
        # json.loads recurses once per level: a hostile file must not end in a traceback.
        raise UsageError(f"{what} {path} nests too deeply to read") from None


def _manifest(args: argparse.Namespace) -> Manifest | None:
    if not args.manifest:
        return None
    try:
        return parse_manifest(_read_json(args.manifest, args.max_bytes, "manifest"))
    except ManifestError as exc:
        raise UsageError(f"manifest {args.manifest} is malformed: {exc}") from exc


def _analyze(path: str, args: argparse.Namespace, bundle: str | None) -> Analysis:
    """The policy of a file: bundle props, or the chosen bundle of a bundles descriptor."""
    text = _read(path, args.max_bytes, "file")
    try:
        return analyze_text(
            text, manifest=args.manifest_data, max_bytes=args.max_bytes, bundle=bundle
        )
    except DescriptorError as exc:
        raise DescriptorError(exc.kind, f"{path}: {exc}", exc.policy_ids) from exc


def _diagnostic_line(file: str, diagnostic: Diagnostic) -> str:
    """Compiler-style, so editors and CI logs link to the line: ``file:12:5: error [code] …``."""
    where = f"{file}:{diagnostic.line}:{diagnostic.column}" if diagnostic.line else file
    at = f" {diagnostic.path}:" if diagnostic.path else ""
    hint = f" Hint: {diagnostic.hint}" if diagnostic.hint else ""
    return f"{where}: {diagnostic.severity} [{diagnostic.code}]{at} {diagnostic.message}{hint}"


def _summary_line(analysis: Analysis) -> str:
    s = analysis.summary()
    return f"{counted(s['errors'], 'error')}, {counted(s['warnings'], 'warning')}, {s['info']} info"


def _print_json(data: Any, out: TextIO) -> None:
    out.write(json_text(data))


def _print_refused(file: str, analysis: Analysis, err: TextIO) -> int:
    for diagnostic in analysis.diagnostics:
        err.write(_diagnostic_line(file, diagnostic) + "\n")
    return EXIT_NEGATIVE


def _note_errors(file: str, analysis: Analysis, err: TextIO) -> int:
    """Other commands still print their output; errors are named on stderr and exit 1."""
    if not analysis.has_errors:
        return EXIT_OK
    errors = analysis.summary()["errors"]
    err.write(
        f"traitdeck: {file} has {counted(errors, 'error')};"
        f" run 'traitdeck validate {file}' to see them\n"
    )
    return EXIT_NEGATIVE


def _run(analysis: Analysis, args: argparse.Namespace, err: TextIO) -> AgentRun:
    """The agent as the runtime runs it: an id the policy does not name falls back as there
    (``agent-resolved`` on stderr)."""
    role = None if args.role == "none" else args.role
    run = agent_run(analysis.data, args.agent, args.manifest_data, role=role)
    for diagnostic in run.diagnostics:
        err.write(_diagnostic_line(args.file, diagnostic) + "\n")
    return run


def cmd_validate(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    if args.format == "json":
        _print_json(analysis.report(), out)
    else:
        for diagnostic in analysis.diagnostics:
            out.write(_diagnostic_line(args.file, diagnostic) + "\n")
        out.write(_summary_line(analysis) + "\n")
    return EXIT_NEGATIVE if analysis.has_errors else EXIT_OK


def cmd_effective(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    run = _run(analysis, args, err)
    # A YAML key may be a date or a number: JSON (and the provenance) spell keys as text.
    data = jsonable(
        {
            **effective_json(run.resolution),
            "resolved_agent": run.resolved_agent,
            "unseen_tools": [entry.as_json() for entry in unseen_tools(run.resolution)],
            "diagnostics": [d.to_dict() for d in run.diagnostics],
            **agent_presentation(
                analysis.data,
                args.agent,
                # The setting's default is the runtime's: off (as config.settings reads it).
                mode_setting=os.environ.get("TRAITDECK_MULTI_ACTION_MODE", "off"),
            ),
        }
    )
    if args.format == "json":
        _print_json(data, out)
    else:
        for tool_id, tool in data["tools"].items():
            early = "starts early" if tool["early"] else "after generation"
            strategy = ", ".join(tool["traits"].get("strategy", ["unknown"]))
            out.write(f"{tool_id}  [{strategy}]  {early}\n")
            for key, value in tool["traits"].items():
                origin = tool["provenance"].get(key, "")
                out.write(f"    {key}: {json.dumps(value, ensure_ascii=False)}  ({origin})\n")
            for ns, override in tool.get("namespace_overrides", {}).items():
                replacement = json.dumps(override, ensure_ascii=False)
                out.write(f"    namespace {ns} replaces all traits with: {replacement}\n")
            if tool["execution_design"]:
                design = json.dumps(tool["execution_design"], ensure_ascii=False)
                out.write(f"    execution design: {design}\n")
        for unseen in data["unseen_tools"]:
            strategy = ", ".join(unseen["traits"].get("strategy", ["unknown"]))
            early = "starts early" if unseen["early"] else "after generation"
            out.write(f"{unseen['pattern']}  [{strategy}]  {early}  ({unseen['tools']})\n")
    return _note_errors(args.file, analysis, err)


def _catalog_note(agent: str, preview: CatalogPreview) -> str:
    """Which form the model of ``agent`` reads by default and where that comes from (stderr)."""
    note = (
        f"traitdeck: {preview.detail} catalog; agent {agent!r} reads the "
        f"{preview.default_detail} one by default ({preview.default_source})"
    )
    if preview.profile is not None:
        note += f" under its default instruction profile {preview.profile!r}"
    if not preview.include:
        note += (
            f"; its model reads no catalog (include_tool_catalog is off: "
            f"{preview.include_source}), this is the text it would read with it on"
        )
    if preview.detail == "compact":
        note += ". " + COMPACT_OMITS
    return note


def cmd_catalog(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    resolution = _run(analysis, args, err).resolution
    tools = [t for t in resolution.tools if not (args.no_builtins and t.builtin)]
    if args.tool is not None:
        tools = [t for t in tools if t.tool_id == args.tool]
        if not tools:
            err.write(f"traitdeck: agent {args.agent!r} has no tool {args.tool!r}\n")
            return EXIT_NEGATIVE
    listing = [t for t in resolution.listing if t in tools]
    preview = catalog_preview(analysis.data, args.agent, listing, detail=args.detail)
    err.write(_catalog_note(args.agent, preview) + "\n")
    out.write(
        preview.document(render_unseen(unseen_tools(resolution)) if args.tool is None else "")
    )
    return _note_errors(args.file, analysis, err)


def cmd_dry_run(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    run = _run(analysis, args, err)
    resolution = run.resolution
    try:
        spec = parse_round_spec(_read_json(args.round, args.max_bytes, "round"))
    except RoundSpecError as exc:
        raise UsageError(f"round {args.round} is malformed: {exc}") from exc
    mode = multi_action_mode(
        spec.multi_action_mode,
        ModeSources(
            args.multi_action_mode,
            profile_mode(analysis.data, args.agent, args.profile),
            os.environ.get("TRAITDECK_MULTI_ACTION_MODE"),
        ),
    )
    version, source = react_version(
        VersionSources(
            spec.react_version,
            args.react_version,
            setting=os.environ.get("TRAITDECK_REACT_AGENT_VERSION"),
        )
    )
    result = dry_run(
        spec, resolution, multi_action_mode=mode, react_version=version, version_source=source
    )
    if args.format == "json":
        _print_json({**result, "resolved_agent": run.resolved_agent}, out)
    else:
        for line in describe(result):
            out.write(line + "\n")
    return _note_errors(args.file, analysis, err)


def cmd_fmt(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    out.write(export_text(analysis.data))
    return _note_errors(args.file, analysis, err)


def cmd_export(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    descriptor = _read(args.into, args.max_bytes, "descriptor")
    try:
        written = export_into_descriptor(descriptor, analysis.data, bundle=args.bundle)
    except DescriptorError as exc:
        raise DescriptorError(exc.kind, f"{args.into}: {exc}", exc.policy_ids) from exc
    except ExportRefused as exc:
        for diagnostic in exc.diagnostics:
            err.write(_diagnostic_line(args.into, diagnostic) + "\n")
        err.write(f"traitdeck: {exc}; nothing was written\n")
        return EXIT_NEGATIVE
    if args.in_place:
        target = Path(args.into)
        temporary = target.with_name(f".{target.name}.traitdeck-tmp")
        try:
            temporary.write_bytes(written.text.encode("utf-8"))
            temporary.replace(target)  # atomic: a reader sees the old file or the new one
        except OSError as exc:
            raise UsageError(f"cannot write {args.into}: {exc.strerror or exc}") from exc
        where = ".".join(str(part) for part in written.location)
        err.write(f"traitdeck: wrote the policy into {args.into} ({written.bundle_id}: {where})\n")
    else:
        out.write(written.text)
    return _note_errors(args.file, analysis, err)


def _recorded_rounds(path: str) -> Iterator[RecordedRound]:
    """The rounds of a JSONL file, read line by line (a file of 100k rounds is not held twice)."""
    try:
        stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot read rounds {path}: {exc.strerror or exc}") from exc
    with stream:
        try:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    yield parse_recorded_round(json.loads(line))
                except (ValueError, RecordedRoundError) as exc:
                    raise UsageError(f"{path}:{number}: not a recorded round: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"rounds {path} is not UTF-8 text") from exc


def _side(
    analysis: Analysis, args: argparse.Namespace, resolved: dict[str, str | None] | None = None
) -> tuple[Resolver, ModeFor]:
    """How one side of a replay runs each agent; ``resolved`` collects, per agent id, the agent
    whose tools the runtime reads (the JSON's ``resolved_agents``)."""
    role = None if args.role == "none" else args.role

    def resolver(agent: str) -> AgentResolution | None:
        run = agent_run(analysis.data, agent, args.manifest_data, role=role)
        if resolved is not None:
            resolved[agent] = run.resolved_agent
        return run.resolution

    modes: dict[str, ModeSources] = {}

    def mode(agent: str) -> ModeSources:
        if agent not in modes:  # once per agent: a replay asks for every round
            modes[agent] = ModeSources(
                args.multi_action_mode,
                profile_mode(analysis.data, agent, None),
                os.environ.get("TRAITDECK_MULTI_ACTION_MODE"),
            )
        return modes[agent]

    return resolver, mode


def _chosen_version(args: argparse.Namespace) -> tuple[str, str]:
    """The react agent a command predicts under (for rounds that do not say their own) and where
    it came from: ``--react-version``, else the setting, else KDCube's default ``v2``."""
    return react_version(
        VersionSources(
            explicit=args.react_version, setting=os.environ.get("TRAITDECK_REACT_AGENT_VERSION")
        )
    )


def cmd_replay(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    resolved: dict[str, str | None] = {}
    candidate, candidate_mode = _side(analysis, args, resolved)
    version, source = _chosen_version(args)
    if args.against is None:
        prediction = predict(
            _recorded_rounds(args.rounds),
            policy=candidate,
            mode=candidate_mode,
            react_version=version,
            version_source=source,
        )
        if args.format == "json":
            _print_json({**prediction, "resolved_agents": resolved}, out)
        else:
            out.write(prediction_summary(prediction) + "\n")
            out.write(version_line(version, source) + "\n")
        return _note_errors(args.file, analysis, err)
    other = _analyze(args.against, args, args.against_bundle)
    if other.refused:
        return _print_refused(args.against, other, err)
    baseline, baseline_mode = _side(other, args)
    progress = None
    if err.isatty():

        def progress(done: int) -> None:
            err.write(f"\rreplayed {done:,} rounds")

    report = replay(
        _recorded_rounds(args.rounds),
        candidate=candidate,
        baseline=baseline,
        candidate_mode=candidate_mode,
        baseline_mode=baseline_mode,
        progress=progress,
        react_version=version,
        version_source=source,
    )
    if progress is not None:
        err.write("\n")
    if args.format == "json":
        # One line, with the C encoder: a report over 100k rounds lists every affected one, and
        # its values are plain JSON already.
        body = {**report.as_json(), "resolved_agents": resolved}
        out.write(json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        for line in describe_report(report):
            out.write(line + "\n")
    return _note_errors(args.file, analysis, err)


def cmd_test(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    try:
        suite = load_suite(_read(args.suite, args.max_bytes, "suite"), max_bytes=args.max_bytes)
    except SuiteError as exc:
        raise UsageError(f"suite {args.suite} is malformed: {exc}") from exc
    _, mode = _side(analysis, args)
    role = None if args.role == "none" else args.role
    run = agent_run(analysis.data, suite.agent, args.manifest_data, role=role)
    for diagnostic in run.diagnostics:
        err.write(_diagnostic_line(args.file, diagnostic) + "\n")
    version, source = _chosen_version(args)
    results = run_suite(suite, run.resolution, mode=mode(suite.agent), react_version=version)
    if args.format == "json":
        _print_json(
            {
                "agent": suite.agent,
                "resolved_agent": run.resolved_agent,
                "react_version": version,
                "react_version_source": source,
                "cases": [
                    {"name": r.name, "passed": r.passed, "failures": list(r.failures)}
                    for r in results
                ],
                "failed": sum(not r.passed for r in results),
            },
            out,
        )
    else:
        for result in results:
            out.write(f"{'ok  ' if result.passed else 'FAIL'} {result.name}\n")
            for failure in result.failures:
                out.write(f"       {failure}\n")
        out.write(suite_summary(results) + "\n")
        out.write(version_line(version, source) + "\n")
    errors = _note_errors(args.file, analysis, err)
    return EXIT_NEGATIVE if any(not r.passed for r in results) else errors


def cmd_manifest(args: argparse.Namespace, analysis: Analysis, out: TextIO, err: TextIO) -> int:
    # Imported here: only this command imports the agent's own modules.
    from engine.tools.python_modules import python_manifest

    resolution = agent_run(analysis.data, args.agent, None, role=None).resolution
    root = Path(args.bundle_root) if args.bundle_root else None
    found = python_manifest(resolution, bundle_root=root, python_path=args.python_path)
    _print_json(found.entries, out)
    for label, problem in found.failures:
        err.write(f"traitdeck: {args.agent} {label}: {problem}\n")
    return EXIT_NEGATIVE if found.failures else EXIT_OK


COMMANDS = {
    "manifest": cmd_manifest,
    "validate": cmd_validate,
    "effective": cmd_effective,
    "catalog": cmd_catalog,
    "dry-run": cmd_dry_run,
    "fmt": cmd_fmt,
    "export": cmd_export,
    "replay": cmd_replay,
    "test": cmd_test,
}


def run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.manifest_data = _manifest(args)
        try:
            analysis = _analyze(args.file, args, args.bundle)
        except DescriptorError as exc:
            if args.command != "export" or exc.kind != "props-with-bundle":
                raise
            # export's --bundle names the bundle of --into; POLICY may be plain bundle props.
            analysis = _analyze(args.file, args, None)
        if analysis.refused and args.command != "validate":
            return _print_refused(args.file, analysis, err)
        return COMMANDS[args.command](args, analysis, out, err)
    except UsageError as exc:
        err.write(f"traitdeck: {exc}\n")
        return EXIT_USAGE
    except DescriptorError as exc:
        err.write(f"traitdeck: {exc}\n")
        return exc.exit_code
    except UnknownAgentError:
        err.write(f"traitdeck: {args.file} has no agent {args.agent!r}\n")
        return EXIT_NEGATIVE


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv, sys.stdout, sys.stderr)
    except BrokenPipeError:  # `traitdeck fmt x | head` is not an error
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
