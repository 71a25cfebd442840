-- Release a lease, or take a waiter out of the queue, then wake the oldest live waiter
-- (and only it) if the lease is free.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] liveness (see acquire.lua).
-- ARGV[1] 'release' or 'leave', ARGV[2] owner, ARGV[3] its channel (leave only).
-- release: compare-and-delete; returns 0 if another owner holds the lease.
-- leave: a waiter gives up; if it was the oldest and was woken, the waiter behind it
-- must be woken now or it would sleep until its next refresh.
-- A waiter is queued as '<owner>@<channel>' and woken by publishing its owner there;
-- its client's listener is the only subscriber of that channel (on this server, which
-- is also the node that owns the lock's slot in a cluster).
if ARGV[1] == 'release' then
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then
    return 0
  end
  redis.call('DEL', KEYS[1])
else
  local me = ARGV[2] .. '@' .. ARGV[3]
  redis.call('ZREM', KEYS[2], me)
  redis.call('ZREM', KEYS[3], me)
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return 1
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 1
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
while true do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if first == nil then break end
  if tonumber(redis.call('ZSCORE', KEYS[3], first) or '0') >= now_ms then
    local at = string.find(first, '@', 1, true)
    -- Nobody received it: the waiter's client is gone (its process died, its
    -- connection closed), so drop it now rather than at its liveness deadline.
    if redis.call('PUBLISH', string.sub(first, at + 1), string.sub(first, 1, at - 1)) > 0 then
      break
    end
  end
  redis.call('ZREM', KEYS[2], first)
  redis.call('ZREM', KEYS[3], first)
end
return 1
