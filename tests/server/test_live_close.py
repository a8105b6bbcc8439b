"""The live websocket under a real worker: a client that sends a frame gets the documented close
code (4415), not daphne's 1011 with a traceback in the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from observe.consumers import UNSUPPORTED_DATA

PROBE = Path(__file__).with_name("live_close_probe.py")


def test_a_client_frame_closes_the_stream_with_the_documented_code(tmp_path: Path) -> None:
    result = subprocess.run(  # noqa: S603 (our own interpreter and script)
        [sys.executable, str(PROBE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"close code: {UNSUPPORTED_DATA}" in result.stdout, result.stdout[-2000:]
    assert UNSUPPORTED_DATA == 4415
    assert "Traceback" not in result.stdout
