"""Traitdeck settings, driven by environment variables.

The defaults are the embedded profile: a SQLite file in the repository root (WAL mode) and the
in-memory channel layer. Nothing exists only in production: every knob is an environment
variable listed in the README's settings table.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _dev_secret_key() -> str:
    """A key generated once per checkout, so dev sessions survive a restart."""
    path = BASE_DIR / ".dev-secret-key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        path.write_text(key + "\n")
        return key


DEBUG = env_bool("DEBUG")
DEMO = env_bool("TRAITDECK_DEMO")

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = _dev_secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",
    "django_htmx",
    "accounts",
    "policy",
    "observe",
    "audit",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.AccessMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.role",
            ],
        },
    },
]

ASGI_APPLICATION = "config.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the live view read while ingest writes; IMMEDIATE avoids "database is locked"
    # upgrades from read to write transactions under concurrent requests.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    test_db_file = os.environ.get("TRAITDECK_TEST_DB_FILE")
    if test_db_file:
        DATABASES["default"]["TEST"] = {"NAME": test_db_file}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 2000},
        }
    }
else:
    # The in-memory layer drops messages silently once a consumer's queue is full (default 100):
    # a burst of ingest would lose live updates. 2000 held every message of 8 concurrent posters.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": int(os.environ.get("CHANNEL_CAPACITY", "2000"))},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

#: Largest request body Django reads (the web import refuses over 1 MiB itself, with 413).
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}},
}

#: Rounds older than this are removed by `prune_rounds` when no --older-than is given.
ROUND_RETENTION_DAYS = int(os.environ.get("TRAITDECK_ROUND_RETENTION_DAYS", "30"))

# The runtime's deployment setting AI_REACT_AGENT_MULTI_ACTION (default "off"), for dry-runs that
# name no mode of their own and no instruction profile that declares one (DESIGN §2.10 item 6).
TRAITDECK_MULTI_ACTION_MODE = os.environ.get("TRAITDECK_MULTI_ACTION_MODE", "off")

# --- input checks, login throttling and the web's caps (hardening) ------------------------------
#: Events whose ``ts`` is later than now plus this many seconds are rejected (by index).
TRAITDECK_CLOCK_SKEW_S = int(os.environ.get("TRAITDECK_CLOCK_SKEW_S", "600"))
#: Failed logins allowed per account and per client address within the window; 0: no limit.
TRAITDECK_LOGIN_MAX_ATTEMPTS = int(os.environ.get("TRAITDECK_LOGIN_MAX_ATTEMPTS", "10"))
TRAITDECK_LOGIN_WINDOW_S = int(os.environ.get("TRAITDECK_LOGIN_WINDOW_S", "900"))
#: The largest policy the web accepts (the CLI has no caps): over one → ``policy-too-large``.
TRAITDECK_MAX_AGENTS = int(os.environ.get("TRAITDECK_MAX_AGENTS", "1000"))
TRAITDECK_MAX_CONNECTIONS = int(os.environ.get("TRAITDECK_MAX_CONNECTIONS", "5000"))
TRAITDECK_MAX_TOOLS = int(os.environ.get("TRAITDECK_MAX_TOOLS", "50000"))
#: Live-view websockets one user may hold open at once (the next one is refused).
TRAITDECK_MAX_WEBSOCKETS_PER_USER = int(os.environ.get("TRAITDECK_MAX_WEBSOCKETS_PER_USER", "50"))
#: Password reset needs a way to send mail: it is offered only when EMAIL_HOST is set.
_EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
PASSWORD_RESET_ENABLED = bool(_EMAIL_HOST)
if PASSWORD_RESET_ENABLED:
    MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": _EMAIL_HOST,
                "port": int(os.environ.get("EMAIL_PORT", "587")),
                "username": os.environ.get("EMAIL_HOST_USER", ""),
                "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
                "use_tls": env_bool("EMAIL_USE_TLS", True),
            },
        }
    }
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "traitdeck@localhost")
