"""Record what Traitdeck's compose overlay relies on in KDCube's all-in-one compose file:
``KDCUBE_SRC=… python -m conformance.kdcube_compose``.

The file (``app/ai-app/deployment/docker/all_in_one_kdcube/docker-compose.yaml`` of the runtime's
repository, two folders above ``KDCUBE_SRC``) is read, never copied: the fixture keeps only its
network names and, for the services the overlay uses (the database, Redis, the processor whose
admin props routes Traitdeck calls, the metric service), their networks, container ports, image,
command and the ``${VARIABLES}`` they are configured with. ``tests/deploy/test_compose.py`` holds
``deploy/compose/`` to it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from conformance import harness

NAME = "kdcube-compose"
NOTICE = (
    "Names read from KDCube's all-in-one docker-compose.yaml (github.com/kdcube/kdcube-ai-app, "
    "MIT License, Copyright (c) 2025 Elena Viter); the file itself is not copied."
)
COMPOSE = Path("deployment/docker/all_in_one_kdcube/docker-compose.yaml")
SERVICES = ("postgres-db", "redis", "chat-proc", "metrics")
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)")


def compose_path(src: Path) -> Path:
    """``KDCUBE_SRC`` is ``…/app/ai-app/src/kdcube-ai-app``; the compose file is under
    ``ai-app``."""
    return src.resolve().parents[1] / COMPOSE


def _variables(value: Any) -> list[str]:
    return sorted(set(_VARIABLE.findall(yaml.safe_dump(value))))


def _port(entry: Any) -> int:
    """The container port of a ``ports:`` entry (``"127.0.0.1:5432:5432"``,
    ``"${X:-8020}:8020"``)."""
    return int(str(entry).rsplit(":", 1)[-1].split("/")[0])


def record(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    cases: list[dict[str, Any]] = [{"id": "networks", "networks": sorted(data["networks"])}]
    for name in SERVICES:
        service = data["services"][name]
        cases.append(
            {
                "id": f"service:{name}",
                "service": name,
                "image": service.get("image"),
                "networks": sorted(service.get("networks") or []),
                "ports": [_port(p) for p in service.get("ports") or []],
                "command": service.get("command"),
                "variables": _variables(
                    {k: service.get(k) for k in ("environment", "command", "healthcheck")}
                ),
            }
        )
    return cases


def _record_from(src: Path) -> list[dict[str, Any]]:
    path = compose_path(src)
    if not path.is_file():
        raise harness.HarnessError(f"no compose file at {path}")
    return record(path)


def main() -> int:
    return harness.record_family(NAME, NOTICE, _record_from)


if __name__ == "__main__":
    raise SystemExit(main())
