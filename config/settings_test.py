"""Settings for the test suite: the real settings with a fixed, test-only secret."""

from __future__ import annotations

import os

os.environ.setdefault(
    "SECRET_KEY", "test-only-secret-key-not-for-production-0123456789-abcdefghijklmnop"
)

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Test suites log in many times from one address; the throttling tests set their own limit.
TRAITDECK_LOGIN_MAX_ATTEMPTS = 0

# Tests render pages without running collectstatic: plain static names, no whitenoise (the
# scale-out tests run real workers on collected files).
MIDDLEWARE = [m for m in MIDDLEWARE if not m.startswith("whitenoise.")]  # noqa: F405
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# The suite's web tests of the dry-run, impact and drift test the v3 agent's pipeline (overseer,
# early start, ledger): they pin v3; KDCube's default v2 is pinned by the tests of v2.
TRAITDECK_REACT_AGENT_VERSION = "v3"
