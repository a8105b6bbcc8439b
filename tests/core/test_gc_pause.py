"""The collector pause around large validations never leaves the collector off."""

from __future__ import annotations

import gc

import pytest

from core.gc_pause import gc_paused


def test_it_pauses_the_collector_and_turns_it_back_on_even_after_an_error() -> None:
    seen: list[bool] = []

    def fails() -> None:
        with gc_paused():
            seen.append(gc.isenabled())
            raise LookupError("boom")

    assert gc.isenabled()
    with pytest.raises(LookupError, match="boom"):
        fails()
    assert seen == [False]
    assert gc.isenabled()


def test_overlapping_pauses_leave_it_on_only_when_the_first_ends() -> None:
    first, second = gc_paused(), gc_paused()
    first.__enter__()
    second.__enter__()  # found it off: must not turn it on when it ends
    second.__exit__(None, None, None)
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert gc.isenabled()


def test_it_leaves_a_collector_that_was_off_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
