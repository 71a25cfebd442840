from django.db import models


class Seat(models.Model):
    """A seat; ``fence_token`` is the highest lock token that wrote it."""

    seat = models.CharField(max_length=8, primary_key=True)
    buyer = models.CharField(max_length=64, null=True)
    fence_token = models.BigIntegerField(null=True)

    class Meta:
        app_label = "shop"
