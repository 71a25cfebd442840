"""A view that sells a seat under its lock, and fences the write by the lease's token:
the UPDATE matches only while no newer token has written the row, so a holder that
paused past its lease and woke up late changes nothing."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import fencelock
from examples.django_shop.shop.models import Seat
from fencelock.integrations.django import locks  # this process's client, from settings


def sell(seat: str, buyer: str, token: int) -> bool:
    """The fenced write: True if it landed, False if a newer token wrote first."""
    with transaction.atomic():
        fresh = Q(fence_token__isnull=True) | Q(fence_token__lt=token)
        changed = Seat.objects.filter(Q(seat=seat, buyer__isnull=True) & fresh).update(
            buyer=buyer, fence_token=token
        )
    return changed == 1


@csrf_exempt
@require_POST
def buy(request: HttpRequest, seat: str) -> JsonResponse:
    buyer = request.POST.get("buyer", "anonymous")
    try:
        with locks().lock(f"seats/{seat}", ttl=10, timeout=5) as lease:
            if not sell(seat, buyer, lease.token):
                return JsonResponse({"seat": seat, "sold": False}, status=409)
            return JsonResponse({"seat": seat, "sold": True, "token": lease.token})
    except fencelock.LockTimeout:
        return JsonResponse({"seat": seat, "sold": False, "busy": True}, status=503)
