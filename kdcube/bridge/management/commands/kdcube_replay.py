"""``kdcube_replay``: publish the recorded KDCube envelopes on Redis, as the runtime publishes them
(for a demo or a walkthrough of the bridge without a running KDCube).

    python manage.py kdcube_replay --redis redis://127.0.0.1:6379/0 [--times 3] [--interval 0.2]

Each pass publishes every recorded envelope (``tests/conformance/fixtures/kdcube-envelopes.json``)
on its recorded channel. Unless ``--as-recorded``, a pass is a new turn: turn ids get a suffix,
the early calls' ``tc_`` ids are recomputed for the new turn (the runtime derives them from it),
and times are moved to now. Exit codes: 0 done; 2 usage error or Redis unreachable.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kdcube.bridge.domain.mapping import MAX_SLOTS, slot_call_id

FIXTURE = (
    Path(__file__).resolve().parents[3]
    / "tests"
    / "conformance"
    / "fixtures"
    / "kdcube-envelopes.json"
)


def retarget(message: dict[str, Any], suffix: str, shift_ms: int) -> dict[str, Any]:
    """The message as the runtime would publish it for turn ``<turn><suffix>``, ``shift_ms``
    later."""
    out = copy.deepcopy(message)
    env = out["payload"]["data"]
    conversation = env.get("conversation") or {}
    old_turn = str(conversation.get("turn_id") or "")
    new_turn = old_turn + suffix
    conversation["turn_id"] = new_turn
    if isinstance(env.get("ts"), int):
        env["ts"] += shift_ms
        env["timestamp"] = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(env["ts"] / 1000))
            + f".{env['ts'] % 1000:03d}Z"
        )
    data = env.get("data")
    if isinstance(data, dict) and isinstance(data.get("iteration"), int):
        call_id = data.get("tool_call_id")
        for index in range(MAX_SLOTS):
            if call_id == slot_call_id(old_turn, data["iteration"], index):
                data["tool_call_id"] = slot_call_id(new_turn, data["iteration"], index)
    return out


class Command(BaseCommand):
    help = "Publish the recorded KDCube envelopes on Redis (a runtime stand-in for demos)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--redis", required=True)
        parser.add_argument("--fixture", default=str(FIXTURE))
        parser.add_argument("--times", type=int, default=1)
        parser.add_argument("--interval", type=float, default=0.1)
        parser.add_argument("--as-recorded", action="store_true")

    def handle(self, *args: Any, **o: Any) -> None:
        try:
            cases = json.loads(Path(o["fixture"]).read_text())["cases"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"cannot read {o['fixture']}: {exc}", returncode=2) from exc
        if not 1 <= o["times"] <= 1000 or not 0 <= o["interval"] <= 60:
            raise CommandError("--times 1..1000, --interval 0..60", returncode=2)
        client = redis.Redis.from_url(o["redis"], socket_connect_timeout=3)
        messages = [m for case in cases for m in case["published"]]
        first_ts = min(m["payload"]["data"].get("ts", 0) for m in messages)
        sent = 0
        try:
            for _ in range(o["times"]):
                suffix = "" if o["as_recorded"] else f"-{uuid.uuid4().hex[:6]}"
                shift = 0 if o["as_recorded"] else int(time.time() * 1000) - first_ts
                for message in messages:
                    out = retarget(message, suffix, shift) if suffix else message
                    client.publish(out["channel"], json.dumps(out["payload"], ensure_ascii=False))
                    sent += 1
                    time.sleep(o["interval"])
        except redis.RedisError as exc:
            raise CommandError(f"Redis at {o['redis']}: {exc}", returncode=2) from exc
        self.stdout.write(f"published {sent} envelopes ({o['times']} pass(es))")
