"""``python -m django nightly``: a job for cron, run under ``fencelock run --once``:

    */5 * * * *  fencelock run --once --at-least 30s reports/nightly -- \\
        python -m django nightly --settings=examples.django_shop.settings
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from examples.django_shop.shop.models import Seat


class Command(BaseCommand):
    help = "Report the seats sold (the job fencelock run keeps to one node at a time)."

    def handle(self, *args: Any, **options: Any) -> None:
        sold = Seat.objects.filter(buyer__isnull=False).count()
        token = os.environ.get("FENCELOCK_TOKEN", "-")
        self.stdout.write(f"report: {sold} seats sold (under token {token})")
