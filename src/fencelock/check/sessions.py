"""The ``session`` nemesis's one act: end a holder's session from the server's side.

What a "session" is differs by backend, and so does what its end costs the holder:

* ``mysql``: ``KILL CONNECTION`` of the connection holding the lease's named lock
  (found by its token in the counter table): the lock goes to a waiter at once.
* ``advisory``: ``pg_terminate_backend`` of the session holding the advisory lock (found
  by its token): likewise revoked at once.
* ``etcd``: ``LeaseRevoke`` of the holder's etcd lease (the key whose create revision is
  the token): the key goes, and the next waiter's key is first.
* ``postgresql`` (lease table) and ``redis``/``redlock``: the lease is a row or a key,
  not a connection; every client connection is dropped (``pg_terminate_backend``,
  ``CLIENT KILL``): the lease stays, the clients reconnect.
* ``zookeeper`` has no way to end another client's session from outside (only a
  client with the session's password can), so the nemesis is refused there.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

from fencelock.check.servers import ServerSet
from fencelock.engine.urls import parse_url

SESSION_KINDS = ("mysql", "advisory", "etcd", "postgresql", "redis", "redlock")
NO_SESSION_NEMESIS = {
    "zookeeper": "ZooKeeper offers no way to end another client's session from outside "
    "(only a client holding the session's password can); use --nemesis server",
}


def end_session(servers: ServerSet, lock_name: str, token: int | None) -> str:
    """End the session holding ``token`` (or every client connection); what was done."""
    kind = servers.kind
    if kind == "mysql":
        return _mysql(servers.url, token)
    if kind == "advisory":
        return _advisory(servers.url, token)
    if kind == "postgresql":
        return _postgresql_all(servers.url)
    if kind == "etcd":
        return _etcd(servers, lock_name, token)
    if kind in ("redis", "redlock"):
        return _redis_all(servers)
    raise ValueError(NO_SESSION_NEMESIS.get(kind, f"no session nemesis for {kind}"))


def _mysql(url: str, token: int | None) -> str:
    import pymysql

    p = parse_url(url)
    host, port = p.hosts[0]
    conn = pymysql.connect(
        host=host,
        port=port or 3306,
        user=p.username,
        password=p.password or "",
        database=p.path.strip("/") or None,
        autocommit=True,
        connect_timeout=5,
    )
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT IS_USED_LOCK(lock_name) FROM fencelock_locks WHERE token = %s", (token,)
            )
            ids = [int(row[0]) for row in cur.fetchall() if row[0] is not None]
            for conn_id in ids:
                cur.execute(f"KILL CONNECTION {conn_id}")
    finally:
        conn.close()
    return f"KILL CONNECTION {', '.join(map(str, ids)) or '(none held it any more)'}"


def _pg(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    plain = url.replace("postgresql+advisory://", "postgresql://", 1).split("?")[0]
    with psycopg.connect(plain, autocommit=True, connect_timeout=5) as conn:
        return list(conn.execute(query, params).fetchall())


def _advisory(url: str, token: int | None) -> str:
    rows = _pg(
        url,
        "SELECT l.pid, pg_terminate_backend(l.pid) FROM pg_locks l"
        " JOIN fencelock_advisory a"
        " ON l.classid = ((a.key >> 32) & 4294967295)::bigint::oid"
        " AND l.objid = (a.key & 4294967295)::bigint::oid AND l.objsubid = 1"
        " WHERE l.locktype = 'advisory' AND l.granted AND a.token = %s",
        (token,),
    )
    pids = ", ".join(str(row[0]) for row in rows) or "(none held it any more)"
    return f"pg_terminate_backend {pids}"


def _postgresql_all(url: str) -> str:
    rows = _pg(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    return f"pg_terminate_backend of every client connection ({len(rows)})"


def _redis_all(servers: ServerSet) -> str:
    import redis

    killed = 0
    for node in servers.nodes:
        host, port = node.address.rsplit(":", 1)
        with redis.Redis(host=host, port=int(port), socket_timeout=2) as r:
            killed += int(r.execute_command("CLIENT KILL TYPE normal SKIPME yes"))
    return f"CLIENT KILL of every client connection ({killed})"


def _etcd(servers: ServerSet, lock_name: str, token: int | None) -> str:
    options = parse_url(servers.url).options
    prefix = (options.get("prefix") or "fencelock/") + lock_name
    errors = []
    for node in servers.nodes:  # any live member answers for the cluster
        base = f"http://{node.address}"
        try:
            kvs = _post(
                base + "/v3/kv/range",
                {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)), "keys_only": True},
            ).get("kvs", [])
            leases = {
                int(kv["lease"])
                for kv in kvs
                if kv.get("lease") and (token is None or int(kv["create_revision"]) == token)
            }
            for lease in leases:
                _post(base + "/v3/lease/revoke", {"ID": lease})
            named = ", ".join(f"{lease:x}" for lease in sorted(leases))
            return f"etcd LeaseRevoke {named or '(none held it any more)'}"
        except OSError as exc:
            errors.append(f"{node.name}: {exc}")
    return "etcd LeaseRevoke failed: " + "; ".join(errors)


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST")  # noqa: S310 (an http URL built from the members addresses)
    with urllib.request.urlopen(request, timeout=3) as response:  # noqa: S310 (an http URL built from the members addresses)
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    last = prefix[-1]
    return prefix[:-1] + chr(ord(last) + 1)
