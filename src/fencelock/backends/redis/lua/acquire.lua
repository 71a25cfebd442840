-- Take the lease and issue its fencing token in one step, or join the waiters' queue.
-- KEYS[1] lock, KEYS[2] token counter, KEYS[3] queue (zset: waiter -> arrival, µs),
-- KEYS[4] liveness (zset: waiter -> deadline, ms).
-- ARGV[1] TTL ms, ARGV[2] the client's wake-up channel, ARGV[3] starvation bound µs
-- (0: strict FIFO), ARGV[4] waiter liveness ms, ARGV[5] owner (last: the only argument
-- that changes between calls, so the rest of the command is packed once).
-- A free lease goes to whoever asks, unless the oldest live waiter has waited longer
-- than the starvation bound: then only that waiter may take it. Releases wake only the
-- oldest waiter (release_wake.lua), so a release costs one wake-up, not one per waiter.
-- The token counter is seeded from the server's clock (microseconds), so a Redis that
-- restarted empty, or a promoted replica that missed the last writes, still issues
-- tokens greater than before (as long as its clock did not go back). For the same reason
-- the counter may expire once the name has been idle for a week (COUNTER_IDLE_MS): a
-- token issued after that, at least the clock, exceeds every earlier one unless the
-- clock went back by more than a week (docs/backends.md, "Keys and their lifetimes").
-- With no queue (no waiter at all: the common case) the lease is taken with one SET NX
-- and the counter moved with one SET GET: an uncontended grant runs four commands, and
-- nothing else of this script.
local COUNTER_IDLE_MS = 604800000
local now = redis.call('TIME')
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
local owner = ARGV[5]

-- The token: the counter plus one, at least the clock, stored as the counter.
local function next_token()
  local expiry = COUNTER_IDLE_MS + tonumber(ARGV[1])
  local text = string.format('%.0f', now_us)
  local before = redis.pcall('SET', KEYS[2], text, 'PX', expiry, 'GET')
  if type(before) == 'table' and before.err then  -- a Redis before 6.2: no SET GET
    before = redis.call('GET', KEYS[2])
    redis.call('SET', KEYS[2], text, 'PX', expiry)
  end
  if before and tonumber(before) >= now_us then
    text = string.format('%.0f', tonumber(before) + 1)
    redis.call('SET', KEYS[2], text, 'PX', expiry)
  end
  return text
end

local no_waiters = redis.call('EXISTS', KEYS[3]) == 0
if no_waiters and redis.call('SET', KEYS[1], owner, 'NX', 'PX', ARGV[1]) then
  return {1, next_token()}
end

-- Taken, or waiters queued.
local now_ms = math.floor(now_us / 1000)
local me = owner .. '@' .. ARGV[2]

local function oldest_live_waiter()
  while true do
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if #first == 0 then return nil, nil end
    local alive_until = tonumber(redis.call('ZSCORE', KEYS[4], first[1]) or '0')
    if alive_until >= now_ms then return first[1], tonumber(first[2]) end
    redis.call('ZREM', KEYS[3], first[1])
    redis.call('ZREM', KEYS[4], first[1])
  end
end

local function join_queue()
  local liveness = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], 'NX', now_us, me)
  redis.call('ZADD', KEYS[4], now_ms + liveness, me)
  redis.call('PEXPIRE', KEYS[3], liveness * 2)
  redis.call('PEXPIRE', KEYS[4], liveness * 2)
end

if redis.call('EXISTS', KEYS[1]) == 0 then
  local head, arrived = oldest_live_waiter()
  -- A starving oldest waiter keeps the free lease only if it is still there to take it:
  -- wake it (a lease that expired, rather than being released, woke nobody), and drop
  -- it if the wake-up reaches nobody (its process died).
  while head ~= nil and head ~= me and now_us - arrived >= tonumber(ARGV[3]) do
    local at = string.find(head, '@', 1, true)
    if redis.call('PUBLISH', string.sub(head, at + 1), string.sub(head, 1, at - 1)) > 0 then
      break
    end
    redis.call('ZREM', KEYS[3], head)
    redis.call('ZREM', KEYS[4], head)
    head, arrived = oldest_live_waiter()
  end
  if head == nil or head == me or now_us - arrived < tonumber(ARGV[3]) then
    redis.call('SET', KEYS[1], owner, 'PX', ARGV[1])
    if head ~= nil then
      redis.call('ZREM', KEYS[3], me)
      redis.call('ZREM', KEYS[4], me)
    end
    return {1, next_token()}
  end
  join_queue()
  return {0, -3}  -- free, but kept for the oldest waiter, just woken
end
join_queue()
return {0, redis.call('PTTL', KEYS[1])}
