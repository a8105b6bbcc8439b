"""Failed logins counted per account and per client address, in the shared cache.

A failed login counts against both the username and the address it came from; once either has
``TRAITDECK_LOGIN_MAX_ATTEMPTS`` failures within ``TRAITDECK_LOGIN_WINDOW_S`` seconds (counted
from its first failure), the login form answers 429 without looking at the password. A
successful login clears the account's count (not the address's: one address guessing many
accounts stays blocked). ``TRAITDECK_LOGIN_MAX_ATTEMPTS=0`` turns the limit off (the test
settings do). The cache is Redis when ``REDIS_URL`` is set, so every worker sees the same counts.
"""

from __future__ import annotations

import hashlib
import math
import time
import unicodedata

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's address as far as this server can trust it.

    ``TRAITDECK_TRUSTED_PROXY_HOPS`` (default 0) says how many proxies in front of daphne append
    to ``X-Forwarded-For``: with 0 the header is the client's own text and is ignored (the TCP
    peer counts); with N the N-th entry from the right is the address the outermost trusted
    proxy saw (what the client wrote before it is not read). Fewer entries than N: the peer.
    """
    peer = str(request.META.get("REMOTE_ADDR") or "unknown")
    hops = settings.TRAITDECK_TRUSTED_PROXY_HOPS
    if hops <= 0:
        return peer
    entries = [e.strip() for e in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    entries = [e for e in entries if e]
    return entries[-hops] if len(entries) >= hops else peer


def account_key(username: str) -> str:
    """The account a typed username logs in as: Django's login form strips it and normalises
    it to NFKC before looking it up (``UsernameField``), so every spelling that reaches the
    same account is counted as that account (case too: over-counting is safe, under- is not)."""
    return unicodedata.normalize("NFKC", username.strip()).casefold()


def _key(kind: str, value: str) -> str:
    # Hashed: usernames may hold characters some cache backends do not take in keys.
    return f"login-failures:{kind}:{hashlib.sha256(value.encode('utf-8', 'replace')).hexdigest()}"


def _keys(username: str, address: str) -> list[str]:
    return [_key("account", account_key(username)), _key("address", address)]


def login_wait(username: str, address: str) -> int:
    """Seconds until this account and address may try again (0: now)."""
    limit = settings.TRAITDECK_LOGIN_MAX_ATTEMPTS
    if limit <= 0:
        return 0
    now = time.time()
    wait = 0
    for key in _keys(username, address):
        if int(cache.get(key, 0)) >= limit:
            until = cache.get(f"{key}:until")
            left = math.ceil(float(until) - now) if until is not None else 1
            wait = max(wait, left, 1)
    return wait


def login_failed(username: str, address: str) -> None:
    if settings.TRAITDECK_LOGIN_MAX_ATTEMPTS <= 0:
        return
    window = settings.TRAITDECK_LOGIN_WINDOW_S
    for key in _keys(username, address):
        # The window starts at the first failure; both entries expire together.
        cache.add(f"{key}:until", time.time() + window, timeout=window)
        cache.add(key, 0, timeout=window)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: a new window
            cache.set(key, 1, timeout=window)


def login_succeeded(username: str) -> None:
    key = _key("account", account_key(username))
    cache.delete_many([key, f"{key}:until"])


def wait_sentence(seconds: int) -> str:
    """``Too many failed logins …: try again in 14 minutes.``"""
    if seconds < 60:
        when = f"{seconds} second{'' if seconds == 1 else 's'}"
    else:
        minutes = math.ceil(seconds / 60)
        when = f"{minutes} minute{'' if minutes == 1 else 's'}"
    return (
        "Too many failed logins for this account or from this address: the password was not"
        f" checked. Try again in {when}."
    )
