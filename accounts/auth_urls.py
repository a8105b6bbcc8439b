"""``/accounts/…``: Django's auth URLs (same names and paths), with the throttled login and the
password-reset pages answering 404 unless mail is configured (``PASSWORD_RESET_ENABLED``)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts.views_login import LoginView, password_reset_offered

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path(
        "password_reset/",
        password_reset_offered(auth_views.PasswordResetView.as_view()),
        name="password_reset",
    ),
    path(
        "password_reset/done/",
        password_reset_offered(auth_views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        password_reset_offered(auth_views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        password_reset_offered(auth_views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
]
