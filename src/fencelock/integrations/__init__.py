"""Fencing tokens checked by the libraries applications write through.

Each integration is a module of its own, imported by name and never by ``import
fencelock``, so a plain install imports none of these libraries:

- :mod:`fencelock.integrations.sqlalchemy`: the fence table and the fenced update in a
  SQLAlchemy ``Session`` or ``Connection`` (PostgreSQL, MySQL and MariaDB, SQLite);
- :mod:`fencelock.integrations.django`: a Django app (the same fence table as a model
  and its migration), the fence and the fenced update in ``transaction.atomic()``, the
  client from ``settings.FENCELOCK_URL``, and ``manage.py fencelock_run``;
- :mod:`fencelock.integrations.celery`: ``LockedTask``, a task base that holds a lock
  while the task runs (stopped if the lease is lost) or runs it once across the fleet.

Their checks are :mod:`fencelock.sql`'s, the ones the guards of :mod:`fencelock.fencing`
run too: one statement per database, in the caller's transaction.
"""
