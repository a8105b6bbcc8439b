"""``prune_rounds``: ages in days or hours, the retention setting, exit codes (DESIGN §6)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from core.timewindow import format_ts
from observe import services
from observe.models import Event, Round, RoundTool
from observe.services import events_ingest
from tests.observe.ingest_support import event, started

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def round_aged(turn_id: str, age: timedelta) -> None:
    """A round with an event naming a tool, that started ``age`` ago."""
    ts = format_ts(timezone.now() - age)
    result = events_ingest(
        [
            started(turn_id=turn_id, ts=ts),
            event(
                "action.observed",
                turn_id=turn_id,
                ts=ts,
                action_index=0,
                action="call_tool",
                tool_id="a.search",
            ),
        ]
    )
    assert result.accepted == 2


def prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prune_rounds", *args, stdout=out)
    return out.getvalue()


def turns() -> set[str]:
    return set(Round.objects.values_list("turn_id", flat=True))


def test_it_deletes_rounds_older_than_the_days_given_with_their_events() -> None:
    round_aged("old", timedelta(days=31))
    round_aged("recent", timedelta(days=29))
    output = prune("--older-than", "30d")
    assert output.startswith("deleted 1 round that started before ")
    assert turns() == {"recent"}
    assert set(Event.objects.values_list("round__turn_id", flat=True)) == {"recent"}
    assert Event.objects.count() == 2
    assert RoundTool.objects.count() == 1


def test_it_takes_an_age_in_hours() -> None:
    round_aged("older", timedelta(hours=13))
    round_aged("newer", timedelta(hours=11))
    assert "deleted 1 round " in prune("--older-than", "12h")
    assert turns() == {"newer"}


def test_without_an_age_it_uses_the_retention_setting() -> None:
    round_aged("old", timedelta(days=11))
    round_aged("recent", timedelta(days=9))
    with override_settings(ROUND_RETENTION_DAYS=10):
        assert "deleted 1 round " in prune()
    assert turns() == {"recent"}


def test_it_says_when_nothing_was_old_enough() -> None:
    round_aged("recent", timedelta(hours=1))
    assert prune("--older-than", "1d").startswith("deleted 0 rounds ")
    assert turns() == {"recent"}


def test_an_age_past_year_one_deletes_nothing() -> None:
    round_aged("recent", timedelta(days=1))
    assert prune("--older-than", "999999d").startswith("deleted 0 rounds ")


def test_it_deletes_in_batches_until_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "PRUNE_BATCH", 2)
    for i in range(5):
        round_aged(f"old{i}", timedelta(days=40))
    round_aged("recent", timedelta(days=1))
    assert "deleted 5 rounds " in prune("--older-than", "30d")
    assert turns() == {"recent"}


@pytest.mark.parametrize(
    "age", ["30m", "30", "d", "-1d", "1.5d", "30 days", "30D", "", "1w", "1234567d"]
)
def test_another_unit_or_a_malformed_age_is_a_usage_error(age: str) -> None:
    round_aged("old", timedelta(days=400))
    with pytest.raises(CommandError) as caught:
        prune(f"--older-than={age}")  # "=": argparse would take "-1d" for an option
    assert caught.value.returncode == 2
    assert "--older-than must be a whole number of days or hours" in str(caught.value)
    assert turns() == {"old"}


def run_manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_from_a_shell_a_bad_unit_exits_2_with_one_line_and_a_good_one_exits_0(
    tmp_path: Path,
) -> None:
    assert run_manage(tmp_path, "migrate", "-v0").returncode == 0
    bad = run_manage(tmp_path, "prune_rounds", "--older-than", "30m")
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.count("\n") == 1
    assert "--older-than must be a whole number of days or hours" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = run_manage(tmp_path, "prune_rounds", "--older-than", "12h")
    assert good.returncode == 0
    assert good.stdout.startswith("deleted 0 rounds ")
