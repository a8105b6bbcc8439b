"""Traitdeck settings, driven by environment variables.

The defaults are the embedded profile: a SQLite file in the repository root (WAL mode) and the
in-memory channel layer. ``DATABASE_URL=postgres://…`` and ``REDIS_URL=redis://…`` switch to the
scale-out profile (PostgreSQL through psycopg 3, channels-redis); nothing else differs. Nothing
exists only in production: every knob is an environment variable listed in the README's settings
table (and its "Running in production" section).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config.server import max_body_bytes

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}.") from None


def proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """``X-Forwarded-Proto: https`` → Django's ``("HTTP_X_FORWARDED_PROTO", "https")``."""
    if not value.strip():
        return None
    name, sep, expected = value.partition(":")
    if not sep or not name.strip() or not expected.strip():
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER must look like 'X-Forwarded-Proto: https', not {value!r}."
        )
    return "HTTP_" + name.strip().upper().replace("-", "_"), expected.strip()


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

#: Django's own deploy check wants at least this many characters (and 5 distinct ones).
SECRET_KEY_MIN_LENGTH = 50

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off. Generate one with: python3 -c "
            "'import secrets; print(secrets.token_urlsafe(50))'"
        )
    SECRET_KEY = _dev_secret_key()
elif not DEBUG and (
    len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH
    or len(set(SECRET_KEY)) < 5
    or SECRET_KEY.startswith("django-insecure-")
):
    raise ImproperlyConfigured(
        f"SECRET_KEY is too weak: it has {len(SECRET_KEY)} characters; with DEBUG off it needs "
        f"at least {SECRET_KEY_MIN_LENGTH} (5 or more distinct, no 'django-insecure-' prefix). "
        "Generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
#: Origins (``https://traitdeck.example.com``) trusted for CSRF besides the request's own host.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# --- TLS and cookies (all off by default: the embedded profile serves plain HTTP) -------------
#: ``X-Forwarded-Proto: https``: the header a TLS-terminating proxy sets. Only set it when the
#: proxy always sets (or strips) that header, or clients could claim HTTPS.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(os.environ.get("SECURE_PROXY_SSL_HEADER", ""))
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE")

#: No inline script anywhere (scripts live in static/); inline styles stay allowed for SVG
#: charts. ``'self'`` in connect-src also covers the page's own ws:// and wss:// URLs.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

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
    "web",
    "accounts",
    "policy",
    "discovery",
    "kdcube",
    "observe",
    "audit",
    "kdcube.bridge",
    "pages",
]

MIDDLEWARE = [
    # Outermost: HEAD runs as GET everywhere and leaves without a body (config.head).
    "config.head.HeadAsGetMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.AccessMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.error_pages.ErrorPagesMiddleware",  # our 404/500 pages with DEBUG on too (ui)
    # Innermost: a refused form that cannot show its input again is a 422, not a 500.
    "config.form_text.FormTextMiddleware",
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

# Django's ASGI handler runs each request's sync code in a thread of that request's own (a
# thread-sensitive context per request), and connections belong to threads: an HTTP request
# opens a connection (SQLite: ~0.3 ms with its PRAGMAs), whatever CONN_MAX_AGE says. The
# long-lived threads keep theirs: websocket consumers, the bridge, management commands. The
# health check replaces a connection the server dropped.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the live view read while ingest writes; IMMEDIATE avoids "database is locked"
    # upgrades from read to write transactions under concurrent requests.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        # A writer waits this long for the lock, then the API answers 503 + Retry-After.
        "timeout": 5,
    }
    test_db_file = os.environ.get("TRAITDECK_TEST_DB_FILE")
    if test_db_file:
        DATABASES["default"]["TEST"] = {"NAME": test_db_file}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A write that waits this long for a row or table lock fails with a lock timeout, which the
    # API answers with 503 + Retry-After (nothing stored) instead of holding the request open.
    #
    # Prepared statements: Django turns psycopg's off (``prepare_threshold`` None, for poolers
    # in transaction mode); ingest's look-ups over every day's partition ask for one each
    # (``observe.store.prepared``), planned once per connection with a generic plan (planning
    # them took 1.2–1.8 ms a batch each at 38 days). A threshold no statement reaches keeps
    # Django's own statements unprepared. Behind PgBouncer in transaction mode, use 1.21+ with
    # ``max_prepared_statements`` set.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
        f"-c lock_timeout={env_int('DATABASE_LOCK_TIMEOUT_MS', 5000)}"
        " -c plan_cache_mode=force_generic_plan"
    )
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 2**31
    pool_max = env_int("DATABASE_POOL_MAX_SIZE", 20)
    if pool_max > 0:
        # Each request runs in a thread of its own (see above), so without a pool every request
        # would connect and authenticate anew. A request that finds every connection busy for
        # DATABASE_POOL_TIMEOUT_S gets 503 + Retry-After (the pool's timeout is an
        # OperationalError). The pool replaces persistent connections: CONN_MAX_AGE is 0.
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": min(2, pool_max),
            "max_size": pool_max,
            "timeout": env_int("DATABASE_POOL_TIMEOUT_S", 5),
        }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The in-memory layer drops messages silently once a consumer's queue is full (default 100):
# a burst of ingest would lose live updates. 2000 held every message of 8 concurrent posters.
CHANNEL_CAPACITY = env_int("CHANNEL_CAPACITY", 2000)
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    # Every worker shares the groups and channels in Redis: an event stored by one worker wakes
    # the live pages connected to any other.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 times out socket reads after 5 s by default: exactly how long
                # channels-redis blocks waiting for a message (BZPOPMIN, 5 s). Idle websockets
                # then died with 1011 at random. Reads may take longer than that wait.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                "capacity": CHANNEL_CAPACITY,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": CHANNEL_CAPACITY},
        }
    }

# Login attempts are counted in the cache (accounts.login_throttle): with several workers it must
# be one they share, so REDIS_URL (the channel layer's server) serves it too.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "traitdeck",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

#: Django's model backend, except that the demo account logs in only in demo mode.
AUTHENTICATION_BACKENDS = ["accounts.backends.AccountBackend"]

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
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", "") or BASE_DIR / "staticfiles")
#: Serve static files from the source tree (no collectstatic): DEBUG, or the browser tests.
SERVE_STATIC_FROM_SOURCE = DEBUG or env_bool("TRAITDECK_SERVE_STATIC")
# Production: whitenoise serves what `collectstatic` gathered into STATIC_ROOT, under names with
# a content hash (cached "forever") and pre-compressed. From source, names stay plain.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if SERVE_STATIC_FROM_SOURCE
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
if not SERVE_STATIC_FROM_SOURCE:
    # Right after the security and CSP middleware: static responses get their headers too.
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.csp.ContentSecurityPolicyMiddleware") + 1,
        "whitenoise.middleware.WhiteNoiseMiddleware",
    )

#: Largest request body Django reads (the web import refuses over 1 MiB itself, with 413); the
#: same number daphne's request refuses past as the bytes arrive (``config.server``, 413).
DATA_UPLOAD_MAX_MEMORY_SIZE = max_body_bytes()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}},
}

#: How often a live page's stream asks the database again on its own (besides every "rounds
#: changed" message): heals dropped messages and a channel layer that was briefly unreachable.
TRAITDECK_LIVE_TICK_SECONDS = float(os.environ.get("TRAITDECK_LIVE_TICK_SECONDS", "") or 3.0)

#: Rounds older than this are removed by `prune_rounds` when no --older-than is given.
ROUND_RETENTION_DAYS = int(os.environ.get("TRAITDECK_ROUND_RETENTION_DAYS", "30"))

# The runtime's deployment setting AI_REACT_AGENT_MULTI_ACTION (default "off"), for dry-runs that
# name no mode of their own and no instruction profile that declares one (DESIGN §2.10 item 6).
TRAITDECK_MULTI_ACTION_MODE = os.environ.get("TRAITDECK_MULTI_ACTION_MODE", "off")
# The react agent the runtime runs, as its AI_REACT_AGENT_VERSION (KDCube's default "v2"; "v3");
# read as the runtime reads it (an unknown value is v2, and the overview and check --deploy
# warn). A round's own react_version, an explicit choice, round.started's report and the bridge's
# inference come first (engine.round.react_version).
TRAITDECK_REACT_AGENT_VERSION = os.environ.get("TRAITDECK_REACT_AGENT_VERSION", "v2")

#: The KDCube runtime's limit for an isolated tool call (``execute_tool_in_isolation`` passes
#: ``timeout_s=240``): the KDCube bridge reads a ``missing_tool_output`` error at or past it as
#: the timeout it is (docs/kdcube-events.md). Whole seconds, at least 1.
TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S = env_int("TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S", 240)
if TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S < 1:
    raise ImproperlyConfigured(
        "TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S must be at least 1 (seconds), not "
        f"{TRAITDECK_KDCUBE_ISOLATION_TIMEOUT_S}."
    )

# --- input checks, login throttling and the web's caps (hardening) ------------------------------
#: Events whose ``ts`` is later than now plus this many seconds are rejected (by index).
TRAITDECK_CLOCK_SKEW_S = int(os.environ.get("TRAITDECK_CLOCK_SKEW_S", "600"))
#: Failed logins allowed per account and per client address within the window; 0: no limit.
TRAITDECK_LOGIN_MAX_ATTEMPTS = int(os.environ.get("TRAITDECK_LOGIN_MAX_ATTEMPTS", "10"))
TRAITDECK_LOGIN_WINDOW_S = int(os.environ.get("TRAITDECK_LOGIN_WINDOW_S", "900"))
#: How many proxies in front of daphne append to X-Forwarded-For and are trusted (the login
#: throttle's client address, ``accounts.login_throttle.client_address``). 0: none, the header
#: is ignored. Behind the README's nginx (``X-Forwarded-For $remote_addr``): 1.
TRAITDECK_TRUSTED_PROXY_HOPS = env_int("TRAITDECK_TRUSTED_PROXY_HOPS", 0)
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

# Tool discovery (docs/discovery.md): a time limit per server and caps on what one listing may
# bring; the allowlists are empty by default, so nothing is started or contacted until an
# operator lists it (argv arrays matched exactly, each with the env names a policy may set; host
# names or origins, loopback included only when named; which variables may go to which origin).
# `python manage.py check` refuses settings it cannot read (policy/checks.py).
TRAITDECK_MCP_TIMEOUT_S = float(os.environ.get("TRAITDECK_MCP_TIMEOUT_S", "") or 20.0)
TRAITDECK_MCP_MAX_TOOLS = env_int("TRAITDECK_MCP_MAX_TOOLS", 10_000)
TRAITDECK_MCP_MAX_BYTES = env_int("TRAITDECK_MCP_MAX_BYTES", 16 * 1024 * 1024)
TRAITDECK_MCP_STDIO_COMMANDS = os.environ.get("TRAITDECK_MCP_STDIO_COMMANDS", "")
TRAITDECK_MCP_HTTP_HOSTS = os.environ.get("TRAITDECK_MCP_HTTP_HOSTS", "")
TRAITDECK_MCP_CREDENTIALS = os.environ.get("TRAITDECK_MCP_CREDENTIALS", "")
# Discoveries one worker runs at once (one per server id); more are refused, not queued.
TRAITDECK_MCP_CONCURRENT = env_int("TRAITDECK_MCP_CONCURRENT", 2)

# Tool health (docs/tool-health.md): advice needs this many calls; a timeout rate above this is
# too high (also the live bar's alarm); a synchronous tool with a p95 past this many seconds
# should be an async job.
TRAITDECK_HEALTH_MIN_CALLS = int(os.environ.get("TRAITDECK_HEALTH_MIN_CALLS", "20"))
# /api/v1/metrics: tools per agent and agents with series of their own; the rest fold into
# "other" (docs/production.md, cardinality).
TRAITDECK_METRICS_MAX_TOOLS = env_int("TRAITDECK_METRICS_MAX_TOOLS", 50)
TRAITDECK_METRICS_MAX_AGENTS = env_int("TRAITDECK_METRICS_MAX_AGENTS", 100)
TRAITDECK_HEALTH_TIMEOUT_RATE = float(os.environ.get("TRAITDECK_HEALTH_TIMEOUT_RATE", "0.05"))
TRAITDECK_HEALTH_ASYNC_P95_S = float(os.environ.get("TRAITDECK_HEALTH_ASYNC_P95_S", "10"))
