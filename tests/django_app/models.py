"""What the tests write beside the fence."""

from __future__ import annotations

from django.db import models


class Seat(models.Model):
    """A seat sold at most once; ``fence_token``: the newest lease token that wrote it."""

    seat = models.CharField(max_length=8, unique=True)
    buyer = models.CharField(max_length=64, null=True)
    fence_token = models.BigIntegerField(null=True, db_column="fence")

    class Meta:
        app_label = "django_app"


class Payment(models.Model):
    """A row that must not outlive a refused fence."""

    order = models.CharField(max_length=64)
    amount = models.IntegerField()

    class Meta:
        app_label = "django_app"
