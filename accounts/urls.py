from __future__ import annotations

from django.urls import path

from accounts import views_tokens

app_name = "accounts"

urlpatterns = [
    path("", views_tokens.token_list, name="tokens"),
    path("<int:pk>/revoke/", views_tokens.token_revoke, name="token-revoke"),
]
