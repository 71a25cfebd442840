-- The owners waiting in a lock's queue, first in line first (lock.contenders()).
-- KEYS: queue (zset: waiter -> arrival, µs), liveness (zset: waiter -> deadline, ms).
-- A waiter is `owner@channel`; one past its liveness deadline is left out (the next
-- acquire drops it), as acquire.lua passes it over.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local owners = {}
for _, waiter in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if tonumber(redis.call('ZSCORE', KEYS[2], waiter) or '0') >= now_ms then
    local at = string.find(waiter, '@', 1, true)
    owners[#owners + 1] = at and string.sub(waiter, 1, at - 1) or waiter
  end
end
return owners
