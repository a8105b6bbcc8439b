"""Serve KDCube's own admin props routes for the recorder: its ``integrations`` routers mounted
with its own ``mount_integrations_routers``, its own props store (descriptor authority in file
mode + Redis) on a real ``redis-server``, and the ``workspace`` example descriptor.

Only the authentication dependency is swapped: instead of a JWT from KDCube's identity provider,
the bearer token is looked up in KDCube's own ``SimpleIDP`` (a token file of three users written
here), and the route's own requirements (``RequireUser`` +
``RequireRoles("kdcube:role:super-admin")``, read from the dependency's closure) are checked
by KDCube's ``AuthManager.validate_requirements``, mapped to statuses exactly as its gateway
maps them (authentication → 401, authorization → 403).

Nothing here is copied from KDCube: every module is imported from ``KDCUBE_SRC``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TENANT, PROJECT = "acme", "demo"
BUNDLE_ID = "workspace@2026-03-31-13-36"
EXAMPLES = "kdcube_ai_app/apps/chat/sdk/examples/bundles"
#: Bearer tokens of the SimpleIDP users this server knows (test-only secrets, nothing real).
TOKENS = {
    "admin": "td-rec-super-admin",
    "ops": "td-rec-ops-admin",
    "viewer": "td-rec-registered-user",
}
#: Secret references placed in the descriptor: the loader resolves them (KDCube's
#: ``_resolve_props_node``), so what GET returns holds these values in plain text.
SECRET_ENV = {
    "TD_REC_TELEMETRY_TOKEN": "resolved-telemetry-secret",
    "TD_REC_KNOWLEDGE_KEY": "resolved-knowledge-secret",
}
#: Installed libraries loaded before the stand-in finder exists: they probe optional packages
#: (``hiredis``, ``chardet``, ``uvloop``) with try/except ImportError; a stand-in would answer.
PREIMPORT = ("requests", "httpx", "langchain_core", "langgraph.graph", "uvicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """A throw-away ``redis-server`` on a free loopback port (no persistence)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is missing: run scripts/ensure-system-deps redis")
        # Not daemonized: this process owns it, stops it and reaps it.
        self.process = subprocess.Popen(
            [
                exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def write_descriptor(src: Path, workdir: Path) -> Path:
    """The workspace example's descriptor, pointed at the example's code, with one secret
    reference outside the consumer surface and one inside it (an MCP server's key)."""
    import yaml

    bundle_dir = src / EXAMPLES / BUNDLE_ID
    doc = yaml.safe_load((bundle_dir / "config" / "bundles.template.yaml").read_text())
    item = doc["bundles"]["items"][0]
    item["path"] = str(bundle_dir)
    item["module"] = "entrypoint"
    item["singleton"] = False
    cfg = item["config"]
    cfg["telemetry_sink"]["token"] = "env:TD_REC_TELEMETRY_TOKEN"
    cfg["surfaces"]["as_consumer"]["mcp"]["services"] = {
        "mcpServers": {
            "knowledge": {
                "transport": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"X-Api-Key": "env:TD_REC_KNOWLEDGE_KEY"},
            }
        }
    }
    path = workdir / "bundles.yaml"
    # A comment KDCube's file-authority writes drop (recorded as whether it survives).
    path.write_text(
        "# kept by hand: review before editing\n" + yaml.safe_dump(doc, sort_keys=False)
    )
    return path


class AdminServer:
    """KDCube's admin routes served by uvicorn in a thread; ``url`` is its base address."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.workdir = Path(tempfile.mkdtemp(prefix="td-kdcube-admin-"))
        self.redis = RedisServer(self.workdir)
        self.port = free_port()
        self.descriptor: Path | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.integrations: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _environment(self) -> None:
        self.descriptor = write_descriptor(self.src, self.workdir)
        os.environ.update(SECRET_ENV)
        os.environ["BUNDLES_YAML_DESCRIPTOR_PATH"] = str(self.descriptor)
        os.environ["BUNDLES_DESCRIPTOR_PROVIDER"] = "file"
        os.environ["TENANT_ID"] = TENANT
        os.environ["PROJECT_ID"] = PROJECT
        os.environ["REDIS_URL"] = self.redis.url
        # KDCube copies its example bundles under this root; keep the copy in our scratch dir.
        os.environ["MANAGED_BUNDLES_ROOT"] = str(self.workdir / "managed-bundles")
        os.environ.setdefault("KDCUBE_STORAGE_PATH", str(self.workdir / "storage"))

    def _app(self) -> Any:
        # Real libraries first: redis probes optional accelerators with try/except ImportError,
        # which the stand-in finder would otherwise answer.
        import importlib

        import fastapi
        import redis.asyncio as aioredis

        from conformance import stubs

        for name in PREIMPORT:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

        stubs.install(str(self.src))
        from kdcube_ai_app.apps.chat.proc.rest.integrations import (
            integrations,
            mount_integrations_routers,
        )
        from kdcube_ai_app.apps.middleware.simple_idp import SimpleIDP
        from kdcube_ai_app.apps.middleware.simple_idp_registry import get_simple_idp_registry
        from kdcube_ai_app.auth.AuthManager import AuthenticationError, AuthorizationError
        from kdcube_ai_app.auth.sessions import RequestContext, UserSession, UserType

        self.integrations = integrations
        registry = get_simple_idp_registry(str(self.workdir / "idp_users.json"), default_users={})
        idp = SimpleIDP(send_validation_error_details=True, registry=registry)
        idp.add_user(
            TOKENS["admin"],
            {
                "sub": "traitdeck-publisher",
                "username": "traitdeck-publisher",
                "roles": ["kdcube:role:super-admin"],
                "permissions": [],
            },
        )
        # A second super-admin: the person who edits the props in KDCube's own widget.
        idp.add_user(
            TOKENS["ops"],
            {
                "sub": "ops-admin",
                "username": "ops-admin",
                "roles": ["kdcube:role:super-admin"],
                "permissions": [],
            },
        )
        idp.add_user(
            TOKENS["viewer"],
            {
                "sub": "plain-user",
                "username": "plain-user",
                "roles": ["kdcube:role:chat-user"],
                "permissions": [],
            },
        )

        @contextlib.asynccontextmanager
        async def lifespan(app: fastapi.FastAPI) -> Any:
            app.state.redis_async = aioredis.from_url(self.redis.url)
            # No PostgreSQL: reading code defaults builds the workflow without its lifecycle
            # hooks, which never touch the pool; a bare object makes any use of it fail loudly.
            app.state.pg_pool = object()
            yield
            await app.state.redis_async.aclose()

        app = fastapi.FastAPI(lifespan=lifespan)
        mount_integrations_routers(app)

        def override_for(dependency: Any) -> Any:
            cells = dict(
                zip(dependency.__code__.co_freevars, dependency.__closure__ or (), strict=True)
            )
            requirements = list(cells["reqs"].cell_contents)

            async def session(request: fastapi.Request) -> Any:
                header = request.headers.get("authorization", "")
                token = header[7:].strip() if header.lower().startswith("bearer ") else ""
                try:
                    user = await idp.authenticate(token)
                    idp.validate_requirements(user, *requirements)
                except AuthenticationError as exc:
                    raise fastapi.HTTPException(status_code=401, detail=exc.message) from exc
                except AuthorizationError as exc:
                    raise fastapi.HTTPException(status_code=403, detail=exc.message) from exc
                return UserSession(
                    session_id=f"rec-{user.sub}",
                    user_type=UserType.PRIVILEGED,
                    user_id=user.sub,
                    username=user.username,
                    roles=list(user.roles or []),
                    permissions=list(user.permissions or []),
                    request_context=RequestContext(
                        client_ip="127.0.0.1", user_agent="traitdeck-recorder"
                    ),
                )

            # This module postpones annotations; FastAPI needs the class itself to inject it.
            session.__annotations__["request"] = fastapi.Request
            return session

        for route in integrations.admin_router.routes:
            if "/props" not in getattr(route, "path", ""):
                continue
            for dep in route.dependant.dependencies:
                if dep.call is not None and "reqs" in dep.call.__code__.co_freevars:
                    app.dependency_overrides[dep.call] = override_for(dep.call)
        return app

    def start(self) -> AdminServer:
        try:
            return self._start()
        except BaseException:
            self.stop()  # never leave a redis-server or the scratch directory behind
            raise

    def _start(self) -> AdminServer:
        import uvicorn

        self.redis.start()
        self._environment()
        app = self._app()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            # The stand-in finder would answer uvicorn's optional uvloop/httptools probes.
            loop="asyncio",
            http="h11",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("KDCube's admin app did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.redis.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> AdminServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # What the recorder reads besides HTTP answers.
    def stored_props(self) -> Any:
        import redis

        key = f"kdcube:config:bundles:props:{TENANT}:{PROJECT}:{BUNDLE_ID}"
        with redis.Redis.from_url(self.redis.url) as r:
            raw = r.get(key)
        return None if raw is None else json.loads(raw)

    def descriptor_text(self) -> str:
        assert self.descriptor is not None
        return self.descriptor.read_text()

    @contextlib.contextmanager
    def published(self) -> Iterator[list[dict[str, Any]]]:
        """Collect what is published on the props-update channel while the block runs."""
        import redis

        out: list[dict[str, Any]] = []
        channel = f"kdcube:config:bundles:props:update:{TENANT}:{PROJECT}"
        client = redis.Redis.from_url(self.redis.url)
        pubsub = client.pubsub()
        pubsub.subscribe(channel)
        while pubsub.get_message(timeout=0.5) is not None:  # the subscribe confirmation
            pass
        try:
            yield out
        finally:
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                msg = pubsub.get_message(timeout=0.1)
                if msg and msg.get("type") == "message":
                    out.append({"channel": channel, "payload": json.loads(msg["data"])})
            pubsub.close()
            client.close()


def run_forever(src: Path) -> None:  # pragma: no cover - a manual aid for walkthroughs
    """``python -m conformance.kdcube_admin``: serve until interrupted, print how to reach it."""
    import signal

    # The walkthrough stops this process with SIGTERM: leave through the context manager.
    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    with AdminServer(src) as server:
        print(
            json.dumps(
                {
                    "url": server.url,
                    "redis": server.redis.url,
                    "tenant": TENANT,
                    "project": PROJECT,
                    "bundle": BUNDLE_ID,
                    "admin_token": TOKENS["admin"],
                    "ops_token": TOKENS["ops"],
                }
            ),
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(asyncio.Event().wait())


if __name__ == "__main__":  # pragma: no cover
    from conformance import harness

    sys.exit(run_forever(harness.source_path()) or 0)
