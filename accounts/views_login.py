"""Login with throttling, and password reset only where mail can be sent."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase

from accounts.login_throttle import (
    client_address,
    login_failed,
    login_succeeded,
    login_wait,
    wait_sentence,
)


class LoginView(auth_views.LoginView):
    """Django's login, refusing (429) an account or address over its failed-login limit
    before the password is checked."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["password_reset_enabled"] = settings.PASSWORD_RESET_ENABLED
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = str(request.POST.get("username", ""))
        wait = login_wait(username, client_address(request))
        if wait:
            context = self.get_context_data(form=self.get_form(), throttled=wait_sentence(wait))
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        result: HttpResponse = super().post(request, *args, **kwargs)
        return result

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        login_succeeded(form.get_user().get_username())
        response: HttpResponse = super().form_valid(form)
        return response

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        username = str(form.data.get("username", ""))
        if username:
            login_failed(username, client_address(self.request))
        response: HttpResponse = super().form_invalid(form)
        return response


def password_reset_offered[**P](
    view: Callable[P, HttpResponseBase],
) -> Callable[P, HttpResponseBase]:
    """404 unless mail can be sent (``EMAIL_HOST`` set): no reset pages that cannot work."""

    @wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_ENABLED:
            raise Http404("Password reset is off: this server has no mail settings.")
        return view(*args, **kwargs)

    return wrapper
