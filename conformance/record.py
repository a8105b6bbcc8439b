"""Record the runtime's answers: ``KDCUBE_SRC=… python -m conformance.record [FAMILY …]``.

First runs the runtime's own unit tests for the modules the recorder drives, under the same
stand-in import hook: if they do not pass, the harness is wrong and nothing is recorded.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conformance import fixtures, harness
from conformance.families import families


def run_runtime_tests(src: harness.Path) -> None:
    env = {
        **os.environ,
        "KDCUBE_SRC": str(src),
        "PYTHONPATH": os.pathsep.join(
            [str(harness.Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
        ),
    }
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "conformance.conftest_plugin",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(src),
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        *[str(src / t) for t in harness.RUNTIME_TESTS],
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"runtime's own tests: {last}")
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit("the runtime's own tests fail under the harness: the harness is wrong")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        src = harness.source_path()
        run_runtime_tests(src)
        rt = harness.load(src)
    except harness.HarnessError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    wanted = set(argv)
    for module in families():
        if wanted and module.NAME not in wanted:
            continue
        cases = module.record(rt)
        path = fixtures.write(module.NAME, rt.commit, cases)
        where = path.relative_to(fixtures.FIXTURES.parent.parent.parent)
        print(f"recorded {len(cases):>5} {module.NAME} cases -> {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
