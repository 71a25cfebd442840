"""The fence table (``fencelock_fences``)."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[object]] = [
        migrations.CreateModel(
            name="Fence",
            fields=[
                ("key", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("token", models.BigIntegerField()),
            ],
            options={"db_table": "fencelock_fences"},
        ),
    ]
