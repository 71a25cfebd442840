"""``manage.py report PATH``: appends the lock's token it runs under to PATH."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Append FENCELOCK_NAME and FENCELOCK_TOKEN to a file (a job's stand-in)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")

    def handle(self, *args: Any, **options: Any) -> None:
        name, token = os.environ.get("FENCELOCK_NAME"), os.environ.get("FENCELOCK_TOKEN")
        with Path(options["path"]).open("a") as out:
            out.write(f"{name} {token}\n")
