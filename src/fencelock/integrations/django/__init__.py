"""Fencing tokens checked in a Django transaction, and fencelock's client from settings
(Django 4.2 and 5.x; PostgreSQL, SQLite 3.24 and later, MySQL and MariaDB).

Add the app to ``INSTALLED_APPS`` (``"fencelock.integrations.django"``) and migrate: it
brings the fence table (``fencelock_fences``, the :class:`~.models.Fence` model: one row
per lock name and the newest token accepted for it), the same table the SQLAlchemy
integration uses. Then, in the transaction that writes::

    from django.db import transaction

    from fencelock.integrations.django import fence, locks

    with locks().lock("orders/42", ttl=30) as lease, transaction.atomic():
        fence("orders/42", lease.token)     # StaleToken: the block rolls back
        Payment.objects.create(order_id=42, amount=1200)

- :func:`fence` checks and records the token in the fence table;
- :func:`fenced_update` writes one row only if its fence column is below the token (the
  version-column pattern), in one ``UPDATE``;
- :func:`locks` is this process's client for ``settings.FENCELOCK_URL``;
- ``manage.py fencelock_run NAME COMMAND ...`` runs a management command under a lock
  (``--once`` for a job that runs on one node only).

The statements are :mod:`fencelock.sql`'s, the ones the SQLAlchemy integration and
:func:`fencelock.fencing.sqlite_fence` run. A refusal raises
:class:`~fencelock.StaleToken` and is counted in :mod:`fencelock.metrics`.
"""

from __future__ import annotations

from fencelock.integrations.django.fences import fence, fenced_update, locks

__all__ = ["fence", "fenced_update", "locks"]
