"""Settings for the test suite: the real settings with a fixed, test-only secret."""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-insecure-secret-key-not-for-production")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Test suites log in many times from one address; the throttling tests set their own limit.
TRAITDECK_LOGIN_MAX_ATTEMPTS = 0
