-- Take the lease and issue its fencing token in one step.
-- KEYS[1] lock key, KEYS[2] token counter; ARGV[1] owner, ARGV[2] TTL in milliseconds.
-- The counter is seeded from the server's clock (microseconds), so a Redis that
-- restarted empty, or a promoted replica that missed the last writes, still issues
-- tokens greater than before (as long as its clock did not go back).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, now_us)
  local text = string.format('%.0f', token)
  redis.call('SET', KEYS[2], text)
  return {1, text}
end
return {0, redis.call('PTTL', KEYS[1])}
