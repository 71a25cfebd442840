"""The fence table as a Django model."""

from __future__ import annotations

from django.db import models

from fencelock.sql.fenced import FENCES


class Fence(models.Model):
    """One lock name's fence: the newest token a write under it was accepted with."""

    key = models.CharField(max_length=255, primary_key=True)
    token = models.BigIntegerField()

    class Meta:
        db_table = FENCES

    def __str__(self) -> str:
        return f"{self.key} @ {self.token}"
