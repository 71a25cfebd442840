-- Redlock phase 1 on one node: take the key, and report this node's token counter.
-- KEYS[1] lock key, KEYS[2] token counter; ARGV[1] owner, ARGV[2] TTL in milliseconds.
-- Returns {1, counter} when taken (the counter read as at least the server's clock in
-- microseconds, so a node restarted empty cannot report a smaller one), else {0, pttl,
-- owner}: the owner tells a lock held on a quorum from rivals that split the nodes.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local counter = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), now_us)
  return {1, string.format('%.0f', counter)}
end
return {0, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[1])}
