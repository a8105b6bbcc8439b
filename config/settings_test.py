"""Settings for the test suite: the real settings with a fixed, test-only secret."""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-insecure-secret-key-not-for-production")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
