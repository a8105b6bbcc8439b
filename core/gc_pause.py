"""Pause Python's cyclic garbage collector around a burst of allocation.

Resolving and validating a policy that reaches thousands of tools allocates hundreds of
thousands of small objects that live until the answer is built; each allocation threshold
crossed triggers a collection that walks every tracked object in the process, so the collector
was about a third of the CPU of validating a 5,000-tool discovery (tests/bench/bench_discovery.py).
Nothing in that work makes reference cycles that need collecting on the spot: reference
counting frees the rest, and the collector runs again as soon as the pause ends.

Process-wide and thread-safe in effect: only the caller that found the collector on turns it
back on, so concurrent pauses never leave it off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
