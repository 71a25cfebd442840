-- What `fencelock status` shows of one lock, in one round trip.
-- KEYS: lock, token, queue.
-- Returns {owner or nil, remaining ms (PTTL), last token or nil, waiters queued}.
return {
  redis.call('GET', KEYS[1]),
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
}
