-- Fair (FIFO) acquire: the lease goes to the oldest live waiter.
-- KEYS[1] lock, KEYS[2] token counter, KEYS[3] queue (zset: owner -> arrival),
-- KEYS[4] liveness (zset: owner -> deadline ms), KEYS[5] arrival counter.
-- ARGV[1] owner, ARGV[2] TTL ms, ARGV[3] waiter liveness ms.
-- A waiter that stops retrying for longer than its liveness is dropped from the queue,
-- so a crashed waiter delays the others by at most that long.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms)
for _, owner in ipairs(dead) do
  redis.call('ZREM', KEYS[3], owner)
  redis.call('ZREM', KEYS[4], owner)
end
local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
if (head == nil or head == ARGV[1]) and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, now_us)
  local text = string.format('%.0f', token)
  redis.call('SET', KEYS[2], text)
  return {1, text}
end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), ARGV[1])
end
redis.call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), ARGV[1])
if head ~= ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, -3}  -- free, but another waiter is first: wait for its release
end
return {0, redis.call('PTTL', KEYS[1])}
