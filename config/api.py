"""The project's one NinjaAPI: every app's router joins here, errors map to HTTP once."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema, Swagger
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from accounts.auth import RuntimeTokenAuth, session_auth
from accounts.models import RuntimeToken
from audit.api import router as audit_router
from config.api_examples import declare_body_examples
from config.api_schema import declare_shared_errors
from discovery.api import router as discovery_router
from engine.round.dryrun import RoundSpecError
from engine.tools.manifest import ManifestError
from kdcube.api import router as kdcube_router
from kdcube.bridge.api import router as bridge_router
from observe.api import router as observe_router
from observe.api_health import router as health_router
from observe.selectors import BadCursor
from pages.metrics import router as metrics_router
from policy.api import router as policy_router
from policy.api_edit import router as policy_edit_router
from policy.api_versions import router as versions_router
from policy.api_versions import runtime_router
from policy.domain.edits import as_sentence
from policy.selectors import AgentNotFound
from policy.services import EditRefused, PolicyTooLarge, StaleRevision
from policy.versions import ConfirmationNeeded, PublishRefused, SuitesFailing
from web.api_io import RETRY_AFTER_S, StoreBusy

logger = logging.getLogger(__name__)


#: Modules whose operations were published under another module's name before they moved (issue
#: 36): an operation id is ninja's ``<module>_<function>``, and a client generated from the
#: OpenAPI document keeps calling it by that id.
PUBLISHED_AS = {
    "discovery.api": "policy.api_discovery",
    "kdcube.api": "policy.api_kdcube",
    "kdcube.bridge.api": "bridge.api",
}


class TraitdeckAPI(NinjaAPI):
    """The API whose schema also declares the refusals every operation shares (401, 403, 404,
    413, 415, 422, 503 …: ``config.api_schema``), its operation ids kept across moves."""

    def get_openapi_operation_id(self, operation: Any) -> str:
        module = operation.view_func.__module__
        name = operation.view_func.__name__
        return f"{PUBLISHED_AS.get(module, module)}_{name}".replace(".", "_")

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        declare_shared_errors(schema)
        declare_body_examples(schema)
        return schema


class SessionSwagger(Swagger):
    """Swagger UI whose try-outs send the page's CSRF token as ``X-CSRFToken``, so a logged-in
    admin can try every call from ``/api/docs``. ninja adds the header only when the API-wide
    ``auth`` asks for CSRF; here each router names its own auth, so ninja left it out and every
    POST answered 403 "CSRF token missing"."""

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        from ninja.openapi.docs import render_template

        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {
            "swagger_settings": json.dumps(self.settings, indent=1),
            "api": api,
            "add_csrf": True,
        }
        return render_template(request, self.template, self.template_cdn, context)


api = TraitdeckAPI(
    title="Traitdeck API",
    version="1",
    description=(
        "Control plane for the tool policy of LLM agent runtimes. Browser clients use the session"
        " cookie and `X-CSRFToken`; machines use `Authorization: Bearer <runtime token>`."
    ),
    urls_namespace="api",
    docs=SessionSwagger(),
)


def install_error_handlers(target: NinjaAPI) -> None:
    """Map errors to ``{"error": "<plain sentence>", …}`` bodies with the statuses of DESIGN §6."""

    def respond(request: HttpRequest, status: int, message: str, **details: Any) -> HttpResponse:
        return target.create_response(request, {"error": message, **details}, status=status)

    @target.exception_handler(AuthenticationError)
    def on_unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return respond(
            request,
            401,
            "Authentication required: log in, or send a runtime token as "
            "'Authorization: Bearer …'.",
        )

    @target.exception_handler(AuthorizationError)
    def on_forbidden(request: HttpRequest, exc: AuthorizationError) -> HttpResponse:
        return respond(request, 403, f"Not allowed: {exc.message}.")

    @target.exception_handler(ValidationError)
    def on_wrong_shape(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body')}: {e.get('msg', '?')}"
            for e in exc.errors
        ]
        return respond(
            request,
            422,
            "The request does not have the expected shape: " + "; ".join(problems),
            detail=exc.errors,
        )

    @target.exception_handler(RequestDataTooBig)
    def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return respond(request, 413, "The body is over the size limit.")

    @target.exception_handler(HttpError)
    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        return respond(request, exc.status_code, str(exc))

    # The refusals of the services: every router raises them, this is where they become statuses.

    @target.exception_handler(AgentNotFound)
    def on_no_agent(request: HttpRequest, exc: AgentNotFound) -> HttpResponse:
        return respond(request, 404, str(exc))

    @target.exception_handler(StaleRevision)
    def on_stale(request: HttpRequest, exc: StaleRevision) -> HttpResponse:
        return respond(request, 409, str(exc), revision=exc.current)

    @target.exception_handler(EditRefused)
    def on_edit_refused(request: HttpRequest, exc: EditRefused) -> HttpResponse:
        return respond(request, 422, as_sentence(str(exc)))

    @target.exception_handler(PolicyTooLarge)
    def on_policy_too_large(request: HttpRequest, exc: PolicyTooLarge) -> HttpResponse:
        diagnostics = [d.to_dict() for d in exc.diagnostics]
        return respond(request, 422, as_sentence(str(exc)), diagnostics=diagnostics)

    @target.exception_handler(ManifestError)
    def on_bad_manifest(request: HttpRequest, exc: ManifestError) -> HttpResponse:
        return respond(request, 422, f"{exc} Nothing was stored.")

    @target.exception_handler(ConfirmationNeeded)
    def on_needs_confirmation(request: HttpRequest, exc: ConfirmationNeeded) -> HttpResponse:
        diagnostics = [d.to_dict() for d in exc.diagnostics]
        return respond(request, 422, str(exc), needs_confirmation=True, diagnostics=diagnostics)

    @target.exception_handler(SuitesFailing)
    def on_suites_failing(request: HttpRequest, exc: SuitesFailing) -> HttpResponse:
        return respond(request, 422, str(exc), needs_confirmation=True, failing_cases=exc.failing)

    @target.exception_handler(PublishRefused)
    def on_publish_refused(request: HttpRequest, exc: PublishRefused) -> HttpResponse:
        return respond(request, 422, str(exc))

    @target.exception_handler(RoundSpecError)
    def on_bad_round(request: HttpRequest, exc: RoundSpecError) -> HttpResponse:
        return respond(request, 422, f"The round is malformed: {exc}")

    @target.exception_handler(BadCursor)
    def on_bad_cursor(request: HttpRequest, exc: BadCursor) -> HttpResponse:
        reason = str(exc)
        return respond(request, 422, f"{reason[:1].upper()}{reason[1:]}; start again without it.")

    def busy(request: HttpRequest, retry_after: int) -> HttpResponse:
        response = respond(
            request,
            503,
            "The store is busy and could not take this request; nothing was stored. Send it"
            f" again in {retry_after} s.",
        )
        response["Retry-After"] = str(retry_after)
        return response

    @target.exception_handler(StoreBusy)
    def on_store_busy(request: HttpRequest, exc: StoreBusy) -> HttpResponse:
        logger.warning("%s %s: %s", request.method, request.path, exc)
        return busy(request, exc.retry_after)

    @target.exception_handler(OperationalError)
    def on_database_error(request: HttpRequest, exc: OperationalError) -> HttpResponse:
        # Locked (SQLite), a lock or statement timeout or a lost connection (PostgreSQL): the
        # request's transaction was rolled back, so the same request may be sent again.
        logger.warning("%s %s: database error: %s", request.method, request.path, exc)
        return busy(request, RETRY_AFTER_S)


install_error_handlers(api)

api.add_router("/v1", policy_router)
api.add_router("/v1", policy_edit_router)
api.add_router("/v1", observe_router)
api.add_router("/v1", health_router)
# Browser sessions only: given here, where accounts is known (see audit.api.router).
audit_router.auth = session_auth
api.add_router("/v1", audit_router)
api.add_router("/v1", versions_router)
api.add_router("/v1", runtime_router)
api.add_router("/v1", bridge_router)
api.add_router("/v1", discovery_router)
api.add_router("/v1", kdcube_router)
api.add_router("/v1", metrics_router)


class HealthOut(Schema):
    status: str


@api.get("/v1/health", response=HealthOut, tags=["meta"], auth=None)
def health(request: HttpRequest) -> dict[str, str]:
    """Liveness for load balancers and scripts; needs no login."""
    return {"status": "ok"}


class WhoAmIOut(Schema):
    kind: str
    name: str
    scopes: list[str]


@api.get(
    "/v1/whoami", response=WhoAmIOut, tags=["meta"], auth=[session_auth, RuntimeTokenAuth(None)]
)
def whoami(request: HttpRequest) -> dict[str, Any]:
    """Who the API thinks you are: a logged-in user, or a runtime token and its scopes."""
    principal = request.auth  # type: ignore[attr-defined]
    if isinstance(principal, RuntimeToken):
        return {"kind": "token", "name": principal.name, "scopes": list(principal.scopes)}
    assert isinstance(principal, AbstractBaseUser)
    return {"kind": "user", "name": principal.get_username(), "scopes": []}
