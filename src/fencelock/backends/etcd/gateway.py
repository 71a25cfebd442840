"""The etcd v3 JSON gateway's requests and replies, with no I/O.

etcd serves its whole v3 API as JSON over HTTP: keys and values are base64,
int64s are strings, and fields whose value is zero are left out (a failed
transaction has no ``succeeded``; a keepalive of an expired lease has no ``TTL``).
Everything here builds a request body or reads a reply; :mod:`.http` sends them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]
Reply = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def prefix_end(prefix: bytes) -> bytes:
    """The end of the range of keys starting with ``prefix`` (etcd's ``GetPrefixRangeEnd``)."""
    end = bytearray(prefix)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # every key


def integer(reply: Reply, field: str) -> int:
    """An int64 field: a string in the reply, absent when zero."""
    return int(reply.get(field) or 0)


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    lease: int


def key_values(range_reply: Reply) -> list[KeyValue]:
    return [
        KeyValue(
            unb64(kv.get("key")),
            unb64(kv.get("value")),
            integer(kv, "create_revision"),
            integer(kv, "lease"),
        )
        for kv in range_reply.get("kvs", [])
    ]


def revision(reply: Reply) -> int:
    """The store's revision when the request was served."""
    return integer(reply.get("header", {}), "revision")


def range_request(
    prefix: bytes,
    *,
    first: bool = False,
    last_before: int | None = None,
    count_only: bool = False,
) -> Body:
    """Keys under ``prefix``: all (by create revision), or the first created, or the
    last created before revision ``last_before`` (a waiter's predecessor)."""
    body: Body = {"key": b64(prefix), "range_end": b64(prefix_end(prefix))}
    body["sort_target"] = "CREATE"
    body["sort_order"] = "ASCEND"
    if first:
        body["limit"] = 1
    if last_before is not None:
        body.update(sort_order="DESCEND", limit=1, max_create_revision=str(last_before - 1))
    if count_only:
        body["count_only"] = True
    return body


def enqueue_txn(key: bytes, value: bytes, lease: int, queue: bytes) -> Body:
    """Put ``key`` with ``lease`` unless it exists; either way read it and the queue's head.

    etcd's own ``concurrency.Mutex`` does the same in one transaction.
    """
    head = {"request_range": range_request(queue, first=True)}
    return {
        "compare": [
            {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        ],
        "success": [
            {"request_put": {"key": b64(key), "value": b64(value), "lease": str(lease)}},
            head,
        ],
        "failure": [{"request_range": {"key": b64(key)}}, head],
    }


@dataclass(frozen=True)
class Enqueued:
    """Where a contender stands: its key's create revision, and the queue's head."""

    my_revision: int  # 0: our key is not there (its lease ended)
    my_value: bytes
    head: KeyValue | None
    revision: int


def read_enqueued(reply: Reply) -> Enqueued:
    responses = reply.get("responses", [])
    head_kvs = key_values(responses[1].get("response_range", {})) if len(responses) > 1 else []
    head = head_kvs[0] if head_kvs else None
    if reply.get("succeeded"):
        return Enqueued(revision(reply), b"", head, revision(reply))
    mine = key_values(responses[0].get("response_range", {})) if responses else []
    if not mine:
        return Enqueued(0, b"", head, revision(reply))
    return Enqueued(mine[0].create_revision, mine[0].value, head, revision(reply))


def move_txn(key: bytes, create_revision: int, value: bytes, lease: int) -> Body:
    """Attach ``key`` to another lease if it is still the incarnation created at
    ``create_revision`` (a put keeps the create revision)."""
    return {
        "compare": [
            {
                "key": b64(key),
                "target": "CREATE",
                "result": "EQUAL",
                "create_revision": str(create_revision),
            }
        ],
        "success": [{"request_put": {"key": b64(key), "value": b64(value), "lease": str(lease)}}],
    }


def delete_if_value_txn(key: bytes, value: bytes, record: tuple[bytes, bytes] | None) -> Body:
    """Delete ``key`` if it still holds ``value`` (and then write ``record``); if it does
    not, read ``record``'s key (:func:`recorded`)."""
    success: list[Body] = [{"request_delete_range": {"key": b64(key)}}]
    failure: list[Body] = []
    if record is not None:
        success.append({"request_put": {"key": b64(record[0]), "value": b64(record[1])}})
        failure.append({"request_range": {"key": b64(record[0])}})
    return {
        "compare": [{"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value)}],
        "success": success,
        "failure": failure,
    }


def recorded(delete_reply: Reply, record: tuple[bytes, bytes]) -> bool:
    """Whether a :func:`delete_if_value_txn` that found its key gone found ``record``
    written: the same delete, sent before, landed (its reply was lost)."""
    responses = delete_reply.get("responses", [])
    kvs = key_values(responses[0].get("response_range", {})) if responses else []
    return bool(kvs) and kvs[0].value == record[1]


def watch_create(key: bytes) -> Body:
    """Watch one key's deletes from now on (puts filtered out). From now, not from an
    earlier revision: a watch that starts behind the store joins etcd's unsynced
    watchers, caught up only every 100 ms (``syncWatchersLoop``), which a handoff then
    waits out; the caller looks at the key once the watch is created instead."""
    return {"create_request": {"key": b64(key), "filters": ["NOPUT"]}}


def watch_prefix(prefix: bytes) -> Body:
    """Watch every change of the keys under ``prefix`` from now on."""
    return {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix))}}


def key_request(key: bytes) -> Body:
    """One key, as it is now."""
    return {"key": b64(key)}


def created(watch_message: Reply) -> bool:
    """Whether a watch stream message says the watch now exists (events follow it)."""
    return bool(watch_message.get("result", {}).get("created"))


def deleted(watch_message: Reply) -> bool:
    """Whether a watch stream message reports a delete (or that the watch was cancelled
    or compacted, after which only a fresh look tells)."""
    result = watch_message.get("result", {})
    if result.get("canceled") or integer(result, "compact_revision"):
        return True
    return any(event.get("type") == "DELETE" for event in result.get("events", []))
