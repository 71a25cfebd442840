"""examples/django_shop, run: a view that sells a seat under its lock with a fenced
ORM update, and a management command kept to one node by ``fencelock run --once``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import fencelock
from tests.cli.conftest import FENCELOCK

ROOT = Path(__file__).resolve().parents[2]

SHOP = textwrap.dedent(
    """
    import json, django
    django.setup()
    from django.core.management import call_command
    from django.test import Client
    call_command("migrate", run_syncdb=True, verbosity=0)
    from examples.django_shop.shop.models import Seat
    from examples.django_shop.shop.views import locks, sell
    Seat.objects.create(seat="12A")
    Seat.objects.create(seat="12B")
    web = Client()
    first = web.post("/seats/12A/buy", {"buyer": "alice"})
    second = web.post("/seats/12A/buy", {"buyer": "bob"})
    # a holder that paused past its lease: another took the lock and wrote seat 12B's fence
    import fencelock
    from django.conf import settings
    stale = locks().lock("seats/12B", ttl=10).acquire()
    other = fencelock.connect(settings.FENCELOCK_URL)  # another process, in life
    other.evict("seats/12B")
    newer = other.lock("seats/12B").acquire()
    Seat.objects.filter(seat="12B").update(fence_token=newer.token)  # its read, fenced
    late = sell("12B", "mallory", stale.token)
    newer.release()
    other.close()
    print(json.dumps({
        "first": [first.status_code, first.json()],
        "second": [second.status_code, second.json()],
        "late": late,
        "buyer_12B": Seat.objects.get(seat="12B").buyer,
    }))
    """
)


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="examples.django_shop.settings",
        SHOP_DB=str(tmp_path / "shop.sqlite3"),
        FENCELOCK_URL=f"sqlite:///{tmp_path / 'locks.db'}",
        PYTHONPATH=str(ROOT),
    )


def test_the_view_sells_once_and_a_stale_holder_is_fenced(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SHOP], cwd=ROOT, env=_env(tmp_path),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["first"][0] == 200
    assert seen["first"][1]["sold"] is True
    assert seen["second"][0] == 409  # already sold
    assert seen["late"] is False  # the stale token's write changed nothing
    assert seen["buyer_12B"] is None


def test_the_management_command_runs_once_under_fencelock_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrate = [sys.executable, "-m", "django", "migrate", "--run-syncdb", "--verbosity", "0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True, timeout=120)
    job = [FENCELOCK, "run", "--once", "reports/nightly", "--", sys.executable, "-m", "django",
           "nightly"]  # fmt: skip
    ran = subprocess.run(
        job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "report: 0 seats sold (under token" in ran.stdout
    with fencelock.connect(env["FENCELOCK_URL"]) as client, client.lock("reports/nightly"):
        skipped = subprocess.run(
            job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert skipped.returncode == 0
    assert "report" not in skipped.stdout  # another node has it
