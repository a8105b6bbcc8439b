"""Worker memory under oversized uploads: four anonymous 100 MB ``POST /api/v1/events`` at once
against a real worker, as production starts it (``python -m config.server``) and, for contrast,
plain ``daphne``. Prints a table row per server; asserts nothing. With ``BENCH_JSON=FILE`` the
figures are merged under ``"body_limit"``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_observe import Bench  # noqa: E402

UPLOAD_BYTES = 100 * 1024 * 1024
UPLOADS = 4
PIECE = b"x" * (1024 * 1024)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def upload(port: int, statuses: list[str]) -> None:
    """One anonymous 100 MB POST, sent until the server answers or closes."""
    head = (
        f"POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {UPLOAD_BYTES}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(head)
        try:
            for _ in range(UPLOAD_BYTES // len(PIECE)):
                conn.sendall(PIECE)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = conn.recv(200)
        except ConnectionResetError:
            answer = b""
    statuses.append(answer.split(b"\r\n", 1)[0].decode(errors="replace") or "(closed)")


def measure(server: str) -> dict[str, Any]:
    bench = Bench()
    bench.start([sys.executable, "-m", "config.server"] if server == "config.server" else None)
    try:
        assert bench.process is not None
        time.sleep(1)
        before = rss_mb(bench.process.pid)
        statuses: list[str] = []
        started = time.monotonic()
        threads = [
            threading.Thread(target=upload, args=(bench.port, statuses)) for _ in range(UPLOADS)
        ]
        for thread in threads:
            thread.start()
        peak = before
        while any(thread.is_alive() for thread in threads):
            peak = max(peak, rss_mb(bench.process.pid))
            time.sleep(0.05)
        seconds = time.monotonic() - started
        time.sleep(1)
        after = rss_mb(bench.process.pid)
        return {
            "server": server,
            "rss_before_mb": round(before),
            "rss_peak_mb": round(peak),
            "rss_after_mb": round(after),
            "seconds": round(seconds, 2),
            "statuses": sorted(statuses),
        }
    finally:
        bench.stop()


def main() -> None:
    results = [measure("config.server"), measure("daphne")]
    print(
        f"| server | {UPLOADS} × {UPLOAD_BYTES >> 20} MB anonymous POSTs"
        " | RSS before → peak → after |"
    )
    print("|---|---|---|")
    for r in results:
        answers = ", ".join(sorted(set(r["statuses"])))
        print(
            f"| `{r['server']}` | {answers} in {r['seconds']} s |"
            f" {r['rss_before_mb']} → {r['rss_peak_mb']} → {r['rss_after_mb']} MB |"
        )
    if path := os.environ.get("BENCH_JSON"):
        data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        data["body_limit"] = results
        Path(path).write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
