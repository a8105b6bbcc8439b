"""Deploy-grade settings: docs/production.md's example passes ``check --deploy``, a weak secret
key is refused, and every page carries a Content-Security-Policy without inline scripts."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from config.settings import proxy_ssl_header

ROOT = Path(__file__).resolve().parents[1]


def production_example_env() -> dict[str, str]:
    """The ``KEY=VALUE`` lines of docs/production.md's block marked ``<!-- production-env -->``."""
    readme = (ROOT / "docs" / "production.md").read_text()
    block = re.search(r"<!-- production-env -->\n```bash\n(.*?)```", readme, re.S)
    assert block, "docs/production.md lost its example (the block after <!-- production-env -->)"
    env = {}
    for line in block.group(1).splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value.strip().strip('"')
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_readme_production_example_passes_check_deploy() -> None:
    env = production_example_env()
    assert env["DEBUG"] == "0"
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["REDIS_URL"].startswith("redis://")
    env["SECRET_KEY"] = secrets.token_urlsafe(50)  # as the README tells the reader to make one
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_names_what_the_example_turns_on() -> None:
    """Without the TLS settings the same check warns: the example's settings are what fix it."""
    env = {
        k: v
        for k, v in production_example_env().items()
        if not k.startswith(("SECURE_", "SESSION_COOKIE", "CSRF_COOKIE"))
    }
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in done.stderr


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("", "SECRET_KEY must be set when DEBUG is off"),
        ("short-key-0123456789", "SECRET_KEY is too weak: it has 20 characters"),
        ("a" * 60, "SECRET_KEY is too weak"),
        ("django-insecure-" + secrets.token_urlsafe(50), "SECRET_KEY is too weak"),
    ],
)
def test_a_missing_or_weak_secret_key_stops_the_start_with_debug_off(key: str, why: str) -> None:
    done = manage({"DEBUG": "0", "SECRET_KEY": key}, "check")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert why in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr  # and how to make a good one


def test_a_short_key_is_fine_for_debug() -> None:
    done = manage({"DEBUG": "1", "SECRET_KEY": "dev"}, "check")
    assert done.returncode == 0, done.stderr


def test_proxy_ssl_header_is_read_as_header_and_value() -> None:
    assert proxy_ssl_header("X-Forwarded-Proto: https") == ("HTTP_X_FORWARDED_PROTO", "https")
    assert proxy_ssl_header("") is None
    with pytest.raises(ImproperlyConfigured, match="X-Forwarded-Proto: https"):
        proxy_ssl_header("X-Forwarded-Proto")


def test_a_bad_number_in_the_environment_is_named() -> None:
    done = manage({"DEBUG": "1", "SECURE_HSTS_SECONDS": "a year"}, "check")
    assert done.returncode != 0
    assert "SECURE_HSTS_SECONDS must be a whole number, not 'a year'" in done.stderr


def _directives(header: str) -> dict[str, list[str]]:
    parts = (p.strip().split() for p in header.split(";") if p.strip())
    return {p[0]: p[1:] for p in parts}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/accounts/login/", "/", "/live/", "/policy/import/", "/api/docs"]
)
def test_pages_send_a_csp_that_allows_no_inline_script(admin_client: Client, path: str) -> None:
    response = admin_client.get(path)
    assert response.status_code == 200
    csp = _directives(response["Content-Security-Policy"])
    assert csp["script-src"] == ["'self'"]
    assert "'unsafe-eval'" not in csp["script-src"]
    assert csp["default-src"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"]  # fetches and the live websocket: same origin
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["object-src"] == ["'none'"]


@pytest.mark.django_db
def test_the_api_answers_carry_the_csp_too(client: Client) -> None:
    response = client.get("/api/v1/health")
    assert response.status_code == 200
    assert "script-src 'self'" in response["Content-Security-Policy"]


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
HANDLER = re.compile(r"""\s(on[a-z]+|hx-on[:\w-]*)\s*=\s*["']""", re.I)


def test_no_template_holds_a_script_the_csp_would_block() -> None:
    offenders = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        text = template.read_text()
        for pattern in (INLINE_SCRIPT, HANDLER):
            offenders.extend(
                f"{template.relative_to(ROOT)}: {m.group(0)!r}"
                for m in pattern.finditer(text)
                if 'type="application/json"' not in m.group(0)
            )
        if "javascript:" in text:
            offenders.append(f"{template.relative_to(ROOT)}: javascript: URL")
    assert not offenders, "inline script (move it into static/js/):\n" + "\n".join(offenders)
