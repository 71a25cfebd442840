-- Fencing guard: accept TOKEN for a key only if it is newer than the last accepted,
-- and apply the guarded write (optional) in the same step.
-- KEYS[1] fence key, KEYS[2] data key (optional); ARGV[1] token, ARGV[2] allow_equal
-- ('1' or '0'), ARGV[3] value for the data key (optional).
-- Returns {1, token} when accepted, {0, last} when stale.
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
local token = tonumber(ARGV[1])
if token > last or (ARGV[2] == '1' and token == last) then
  redis.call('SET', KEYS[1], ARGV[1])
  if KEYS[2] then redis.call('SET', KEYS[2], ARGV[3]) end
  return {1, ARGV[1]}
end
return {0, string.format('%.0f', last)}
