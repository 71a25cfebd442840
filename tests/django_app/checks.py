"""fencelock.integrations.django, run by Django's test runner on the database of
$TEST_DATABASE_URL (``python -m django test tests.django_app.checks``): the fence in an
atomic block, the fenced update, the metrics, and ``manage.py fencelock_run``.

Named so that pytest does not collect it: tests/sql/test_django.py runs it, once per
database. TransactionTestCase, so that no test runs inside an atomic block it did not
open itself.
"""

from __future__ import annotations

import os
import tempfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test import TransactionTestCase

import fencelock
from fencelock import metrics
from fencelock.errors import ConfigError, RowNotFound, StaleToken
from fencelock.integrations.django import fence, fenced_update, locks
from fencelock.integrations.django.models import Fence
from tests.django_app.models import Payment, Seat


class Fenced(TransactionTestCase):
    def test_a_newer_token_is_recorded_and_its_writes_land(self) -> None:
        with transaction.atomic():
            fence("orders/1", 5)
            Payment.objects.create(order="1", amount=100)
        with transaction.atomic():
            fence("orders/1", 6)
        assert Fence.objects.get(key="orders/1").token == 6
        assert Payment.objects.filter(order="1").count() == 1

    def test_a_stale_token_is_refused_and_the_block_rolls_back(self) -> None:
        with transaction.atomic():
            fence("orders/2", 9)
        with pytest.raises(StaleToken) as refused:
            _pay_around_the_fence("2", 8)
        assert (refused.value.token, refused.value.last) == (8, 9)
        assert not Payment.objects.filter(order="2").exists()
        assert Fence.objects.get(key="orders/2").token == 9

    def test_the_same_token_passes_only_when_allowed(self) -> None:
        with transaction.atomic():
            fence("orders/3", 4)
        with pytest.raises(StaleToken), transaction.atomic():
            fence("orders/3", 4)
        with transaction.atomic():
            fence("orders/3", 4, allow_equal=True)
        assert Fence.objects.get(key="orders/3").token == 4

    def test_outside_an_atomic_block_the_fence_refuses_to_run(self) -> None:
        with pytest.raises(ConfigError, match="inside its transaction"):
            fence("orders/4", 1)
        assert not Fence.objects.filter(key="orders/4").exists()

    def test_a_refusal_is_counted(self) -> None:
        before = _rejections()
        with transaction.atomic():
            fence("orders/5", 3)
        with pytest.raises(StaleToken), transaction.atomic():
            fence("orders/5", 2)
        assert _rejections() == before + 1


def _pay_around_the_fence(order: str, token: int) -> None:
    """A payment, the fence, another payment: one atomic block."""
    with transaction.atomic():
        Payment.objects.create(order=order, amount=100)  # before the fence: undone too
        fence(f"orders/{order}", token)
        Payment.objects.create(order=order, amount=200)


def _pay_and_sell(seat: str, buyer: str, token: int) -> None:
    """A payment and the seat's fenced sale: one atomic block."""
    with transaction.atomic():
        Payment.objects.create(order=seat, amount=50)
        fenced_update(Seat, {"seat": seat}, {"buyer": buyer}, token)


def _rejections() -> int:
    return sum(m.fencing_rejections for m in metrics.snapshot().values())


class FencedUpdate(TransactionTestCase):
    def setUp(self) -> None:
        Seat.objects.create(seat="12A")

    def test_a_newer_token_writes_the_row_and_its_fence(self) -> None:
        fenced_update(Seat, {"seat": "12A"}, {"buyer": "alice"}, 7)
        seat = Seat.objects.get(seat="12A")
        assert (seat.buyer, seat.fence_token) == ("alice", 7)

    def test_a_stale_token_changes_nothing(self) -> None:
        fenced_update(Seat, {"seat": "12A"}, {"buyer": "alice"}, 7)
        with pytest.raises(StaleToken) as refused:
            fenced_update(Seat, {"seat": "12A"}, {"buyer": "mallory"}, 6)
        assert refused.value.last == 7
        assert Seat.objects.get(seat="12A").buyer == "alice"

    def test_inside_an_atomic_block_a_refusal_rolls_back_the_rest(self) -> None:
        fenced_update(Seat, {"seat": "12A"}, {"buyer": "alice"}, 7)
        with pytest.raises(StaleToken):
            _pay_and_sell("12A", "mallory", 5)
        assert not Payment.objects.filter(order="12A").exists()

    def test_a_missing_row_is_named(self) -> None:
        with pytest.raises(RowNotFound):
            fenced_update(Seat, {"seat": "99Z"}, {"buyer": "alice"}, 1)


class BadInput(TransactionTestCase):
    """Each mistake is a ConfigError that names it, and nothing is written."""

    def test_a_token_that_is_not_an_int(self) -> None:
        with pytest.raises(ConfigError, match="a fencing token is an int"), transaction.atomic():
            fence("orders/6", "7")  # type: ignore[arg-type]

    def test_an_empty_key(self) -> None:
        with pytest.raises(ConfigError, match="non-empty string"), transaction.atomic():
            fence("", 7)

    def test_a_database_not_in_the_settings(self) -> None:
        with pytest.raises(ConfigError, match="no database 'replica'"):
            fence("orders/6", 7, using="replica")

    def test_a_field_the_model_lacks(self) -> None:
        Seat.objects.create(seat="1A")
        with pytest.raises(ConfigError, match="Seat has no field 'price'"):
            fenced_update(Seat, {"seat": "1A"}, {"price": 3}, 7)
        with pytest.raises(ConfigError, match="Seat has no field 'fence'"):
            fenced_update(Seat, {"seat": "1A"}, {"buyer": "bob"}, 7, fence_field="fence")
        assert Seat.objects.get(seat="1A").buyer is None

    def test_what_is_not_a_model(self) -> None:
        with pytest.raises(ConfigError, match="needs a Django model class"):
            fenced_update("Seat", {"seat": "1A"}, {"buyer": "bob"}, 7)  # type: ignore[arg-type]


class FencelockRun(TransactionTestCase):
    def setUp(self) -> None:
        self.out = Path(tempfile.mkdtemp()) / "report.txt"

    def test_the_command_runs_under_the_lock_and_sees_its_token(self) -> None:
        call_command("fencelock_run", "jobs/report", "report", str(self.out))
        name, token = self.out.read_text().split()
        assert name == "jobs/report"
        assert int(token) > 0
        assert "FENCELOCK_TOKEN" not in os.environ  # only while the command ran
        assert not locks().lock("jobs/report").locked()  # released after

    def test_once_skips_while_another_run_holds_the_name(self) -> None:
        other = fencelock.connect(os.environ["FENCELOCK_URL"])
        try:
            held = other.lock("jobs/once", ttl=30).acquire()
            said = StringIO()
            call_command(
                "fencelock_run", "jobs/once", "report", str(self.out), "--once", stdout=said
            )
            assert "skipped" in said.getvalue()
            assert not self.out.exists()
            held.release()
            call_command("fencelock_run", "jobs/once", "report", str(self.out), "--once")
            assert self.out.read_text().split()[0] == "jobs/once"
        finally:
            other.close()

    def test_a_busy_lock_past_its_timeout_is_a_command_error(self) -> None:
        other = fencelock.connect(os.environ["FENCELOCK_URL"])
        try:
            with other.lock("jobs/busy", ttl=30), pytest.raises(CommandError):
                call_command(
                    "fencelock_run", "jobs/busy", "report", str(self.out), "--timeout", "0"
                )
            assert not self.out.exists()
        finally:
            other.close()

    def test_a_bad_ttl_is_a_command_error_naming_it(self) -> None:
        with pytest.raises(CommandError, match="ttl"):
            call_command("fencelock_run", "jobs/ttl", "report", str(self.out), "--ttl", "0")
        with pytest.raises(CommandError, match="at_least"):
            call_command(
                "fencelock_run", "jobs/ttl", "report", str(self.out),
                "--once", "--at-most", "5", "--at-least", "10",
            )  # fmt: skip
        assert not self.out.exists()

    def test_the_client_is_the_processs_own_after_a_fork(self) -> None:
        before = locks()
        before.lock("jobs/fork").acquire().release()
        pid = os.fork()
        if pid == 0:  # the child: its own client, which works
            code = 1
            try:
                mine = locks()
                with mine.lock("jobs/fork", ttl=5, timeout=30) as lease:
                    code = 0 if mine is not before and lease.token > 0 else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert locks() is before  # the parent's is still the one it made
        before.lock("jobs/fork").acquire().release()
