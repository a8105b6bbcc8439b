"""The one KDCube target of a Traitdeck instance and the client of its admin props API.

Django-free on purpose: the recorder drives this same client against KDCube's own routes, and
``make test`` drives it against a server answering from that recording.

Settings (environment): ``TRAITDECK_KDCUBE_URL``, ``TRAITDECK_KDCUBE_TENANT``,
``TRAITDECK_KDCUBE_PROJECT``, ``TRAITDECK_KDCUBE_BUNDLE``, and the super-admin token from
``TRAITDECK_KDCUBE_TOKEN_FILE`` (read on each use, so a rotated file needs no restart) or
``TRAITDECK_KDCUBE_TOKEN``. The token is never stored, shown, logged or audited: it lives in this
object only while a request is made, and neither ``repr`` nor any error carries it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

PROPS_PATH: Final = "/admin/integrations/bundles/{bundle}/props"
DEFAULT_TIMEOUT_S: Final = 10.0
#: Longest answer text kept in an error (KDCube's ``detail`` is a sentence).
ANSWER_CHARS: Final = 300


class KDCubeError(Exception):
    """KDCube did not do what was asked. ``kind``: ``unreachable``, ``timeout``, ``auth``
    (401/403: the token is missing, expired or not a super-admin's), ``refused`` (400, e.g. the
    bundle is not in the active descriptor), ``not-found`` (404), ``server`` (5xx or an answer
    that is not the API's JSON)."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass(frozen=True)
class Target:
    url: str
    tenant: str
    project: str
    bundle: str
    token_file: str = ""
    token: str = field(default="", repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def label(self) -> str:
        """How the target is named on pages and in the audit log (no token)."""
        return f"{self.bundle} @ {self.url} ({self.tenant}/{self.project})"

    def bearer(self) -> str:
        if self.token_file:
            try:
                return Path(self.token_file).read_text().strip()
            except OSError as exc:
                raise KDCubeError(
                    "auth", f"The token file cannot be read ({exc.strerror or 'unreadable'})."
                ) from None
        return self.token.strip()


def target_from_env(env: Mapping[str, str] | None = None) -> Target | None:
    """The configured target, or ``None`` when the four names are not all set."""
    env = os.environ if env is None else env
    names = ("URL", "TENANT", "PROJECT", "BUNDLE")
    values = {n: (env.get(f"TRAITDECK_KDCUBE_{n}") or "").strip() for n in names}
    if not all(values.values()):
        return None
    try:
        timeout = float(env.get("TRAITDECK_KDCUBE_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
    except ValueError:
        timeout = DEFAULT_TIMEOUT_S
    return Target(
        url=values["URL"].rstrip("/"),
        tenant=values["TENANT"],
        project=values["PROJECT"],
        bundle=values["BUNDLE"],
        token_file=(env.get("TRAITDECK_KDCUBE_TOKEN_FILE") or "").strip(),
        token=(env.get("TRAITDECK_KDCUBE_TOKEN") or "").strip(),
        timeout_s=timeout,
    )


def _answer(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:ANSWER_CHARS] or response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else None
    text = detail if isinstance(detail, str) else str(detail if detail is not None else body)
    return text[:ANSWER_CHARS]


def _request(target: Target, method: str, **kwargs: Any) -> dict[str, Any]:
    url = target.url + PROPS_PATH.format(bundle=target.bundle)
    token = target.bearer()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(
            method, url, headers=headers, timeout=target.timeout_s, follow_redirects=False, **kwargs
        )
    except httpx.TimeoutException:
        raise KDCubeError(
            "timeout", f"KDCube did not answer within {target.timeout_s:g} s."
        ) from None
    except httpx.HTTPError as exc:
        raise KDCubeError(
            "unreachable", f"KDCube is unreachable at {target.url} ({type(exc).__name__})."
        ) from None
    status = response.status_code
    if status == 200:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            return body
        raise KDCubeError("server", "KDCube answered 200 with a body that is not JSON.", status)
    answer = _answer(response)
    if status in (401, 403):
        raise KDCubeError(
            "auth",
            f"KDCube refused the token ({status}: {answer}): it may have expired, or it is not"
            " a super-admin's. Renew TRAITDECK_KDCUBE_TOKEN_FILE.",
            status,
        )
    if status == 404:
        raise KDCubeError("not-found", f"KDCube answered 404: {answer}", status)
    if 400 <= status < 500:
        raise KDCubeError("refused", f"KDCube refused the request ({status}): {answer}", status)
    raise KDCubeError("server", f"KDCube failed ({status}): {answer}", status)


def props_read(target: Target) -> dict[str, Any]:
    """``GET …/props``: ``{bundle_id, tenant, project, props, defaults}`` (secrets resolved)."""
    return _request(target, "GET", params={"tenant": target.tenant, "project": target.project})


def props_merge(target: Target, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``POST …/props`` with ``op: merge`` (KDCube deep-merges ``patch`` into the stored props)."""
    body = {"tenant": target.tenant, "project": target.project, "op": "merge", "props": patch}
    return _request(target, "POST", json=body)
