"""deploy/compose/: both files parse, every service's image, command, environment and secret
refers to something that exists, and the overlay uses the names of KDCube's all-in-one compose
file as recorded from the runtime's repository (tests/conformance/fixtures/kdcube-compose.json,
``python -m conformance.kdcube_compose``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from conformance import fixtures
from tests.product import product_sources

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose"
OVERLAY = COMPOSE / "beside-kdcube.yaml"
STANDALONE = COMPOSE / "standalone.yaml"
TRAITDECK_IMAGE = "${TRAITDECK_IMAGE:-traitdeck:latest}"
#: Images of other projects a compose file may start (besides KDCube's own, recorded).
PUBLIC_IMAGES = {"postgres:16", "redis:7"}
#: Variables the image's entrypoint turns into settings (VAR_FILE → VAR).
ENTRYPOINT = (ROOT / "deploy" / "docker-entrypoint.sh").read_text()
SOURCES = "\n".join(p.read_text() for p in product_sources())
#: The settings tables: every setting a compose file gives is documented there.
SETTINGS_DOCS = "".join(
    (ROOT / "docs" / name).read_text() for name in ("production.md", "kdcube-control-plane.md")
)
RECORDED = {case["id"]: case for case in fixtures.read("kdcube-compose")["cases"]}
KDCUBE_SERVICES = {
    case["service"]: case for case in RECORDED.values() if case["id"].startswith("service:")
}
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    assert isinstance(data.get("services"), dict), path
    return data


def traitdeck_services(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in data["services"].items() if s.get("image") == TRAITDECK_IMAGE}


#: Django's own commands the compose files run.
DJANGO_COMMANDS = {"migrate", "createsuperuser", "collectstatic"}


def management_commands() -> set[str]:
    ours = {
        p.stem
        for p in product_sources()
        if p.parent.parts[-2:] == ("management", "commands") and not p.stem.startswith("_")
    }
    return ours | DJANGO_COMMANDS


def command_text(service: dict[str, Any]) -> str:
    command = service.get("command") or []
    return command if isinstance(command, str) else " ".join(map(str, command))


@pytest.mark.parametrize("path", [OVERLAY, STANDALONE], ids=["beside-kdcube", "standalone"])
def test_every_service_refers_to_what_exists(path: Path) -> None:
    data = load(path)
    ours = traitdeck_services(data)
    assert {"traitdeck-migrate", "traitdeck-web", "traitdeck-upkeep"} <= set(ours)
    kdcube_images = {case["image"] for case in KDCUBE_SERVICES.values()}
    for name, service in data["services"].items():
        image = service.get("image")
        assert image == TRAITDECK_IMAGE or image in PUBLIC_IMAGES | kdcube_images, (name, image)
        # Secrets a service mounts are declared, and each is a file.
        for secret in service.get("secrets", []):
            assert "file" in data["secrets"][secret], (name, secret)
        # A *_FILE setting names a secret the service mounts.
        for key, value in (service.get("environment") or {}).items():
            if key.endswith("_FILE"):
                assert value.startswith("/run/secrets/"), (name, key)
                assert value.removeprefix("/run/secrets/") in service["secrets"], (name, key)
        for dependency in service.get("depends_on", {}):
            assert dependency in data["services"] or dependency in KDCUBE_SERVICES, dependency
    for name, service in ours.items():
        build = service["build"]
        context = build["context"]
        base = ROOT if context.startswith("${TRAITDECK_DIR") else (path.parent / context).resolve()
        assert (base / build["dockerfile"]).is_file(), name
        # Every setting is one Traitdeck reads (or the entrypoint turns into one).
        for key in service["environment"]:
            setting = key.removesuffix("_FILE")
            documented = key in SOURCES and f"`{key}`" in SETTINGS_DOCS
            from_file = key.endswith("_FILE") and re.search(rf"\b{setting}\b", ENTRYPOINT)
            assert documented or from_file, (name, key)
        text = command_text(service)
        manage = re.search(r"manage\.py (\w+)", text)
        if manage:
            assert manage.group(1) in management_commands(), (name, text)
        else:
            assert "python -m config.server" in text, name
            assert "config.asgi:application" in text, name


def test_the_overlay_uses_kdcubes_names() -> None:
    data = load(OVERLAY)
    networks = set(RECORDED["networks"]["networks"])
    for name, service in data["services"].items():
        assert set(service["networks"]) <= networks, name
        assert "kdcube-internal" in service["networks"], name
    assert "networks" not in data  # KDCube's file declares them
    ours = traitdeck_services(data)
    env = ours["traitdeck-web"]["environment"]
    kdcube = urlsplit(env["TRAITDECK_KDCUBE_URL"])
    assert kdcube.hostname == "chat-proc"
    assert kdcube.port in KDCUBE_SERVICES["chat-proc"]["ports"]
    database = urlsplit(env["DATABASE_URL"])
    assert database.hostname == "postgres-db"
    assert database.port in KDCUBE_SERVICES["postgres-db"]["ports"]
    # Redis runs with --requirepass ${REDIS_PASSWORD}: the bridge and the channel layer use it.
    redis = KDCUBE_SERVICES["redis"]
    assert "--requirepass" in redis["command"]
    assert "REDIS_PASSWORD" in redis["variables"]
    bridge_env = ours["traitdeck-bridge"]["environment"]
    for url in (env["REDIS_URL"], bridge_env["KDCUBE_REDIS_URL"]):
        parts = urlsplit(url)
        assert (parts.hostname, parts.port, parts.password) == ("redis", 6379, "${REDIS_PASSWORD}")
    assert "bridge_token" in bridge_env["TRAITDECK_TOKEN_FILE"]
    assert "kdcube_bridge" in command_text(ours["traitdeck-bridge"])
    # The database is made on KDCube's postgres-db with KDCube's own credentials.
    init = data["services"]["traitdeck-db-init"]
    assert init["image"] == KDCUBE_SERVICES["postgres-db"]["image"]
    used = set(_VARIABLE.findall(yaml.safe_dump(init["environment"])))
    assert used <= set(KDCUBE_SERVICES["postgres-db"]["variables"])
    assert init["environment"]["PGHOST"] == "postgres-db"
    assert set(init["depends_on"]) == {"postgres-db"}


def test_the_standalone_file_brings_its_own_database_and_redis() -> None:
    data = load(STANDALONE)
    env = traitdeck_services(data)["traitdeck-web"]["environment"]
    assert urlsplit(env["DATABASE_URL"]).hostname in data["services"]
    assert urlsplit(env["REDIS_URL"]).hostname in data["services"]
    assert set(data["networks"]) == {"traitdeck"}
