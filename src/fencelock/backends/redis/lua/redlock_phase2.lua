-- Redlock phase 2 on one node: record the chosen token, if we still hold the key.
-- KEYS[1] lock key, KEYS[2] token counter; ARGV[1] owner, ARGV[2] token T.
-- counter = max(counter, T): counters never decrease. A counter idle for a week expires
-- (T is at least the clock of phase 1: see acquire.lua and docs/backends.md).
local COUNTER_IDLE_MS = 604800000
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tonumber(ARGV[2]) > counter then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', COUNTER_IDLE_MS)
  else
    redis.call('PEXPIRE', KEYS[2], COUNTER_IDLE_MS)
  end
  return 1
end
return 0
