"""Drop-in faces of other lock libraries over fencelock's one lock.

Each face keeps the other library's signature and semantics where they are safe, and
adds the fencing token; where fencelock must differ for safety, the face's docstring
says so. :mod:`fencelock.compat.redis_py`: redis-py's ``Lock`` (and redis.asyncio's);
:mod:`fencelock.compat.redis_lock`: python-redis-lock's ``Lock``;
:mod:`fencelock.compat.pottery`: pottery's ``Redlock`` and ``synchronize``.
"""


def needs_redis(face: str) -> ImportError:
    """What a face that needs redis-py raises on a plain install; ``face`` says what it
    is (``"fencelock.compat.redis_py is redis-py's Lock over fencelock"``)."""
    return ImportError(f"{face} and needs redis-py: pip install 'fencelock[redis]'")
