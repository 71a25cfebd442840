-- Fencing guard: accept TOKEN for a key only if it is newer than the last accepted,
-- and apply the guarded write (optional) in the same step.
-- KEYS[1] fence key, KEYS[2] data key (optional); ARGV[1] token, ARGV[2] allow_equal
-- ('1' or '0'), ARGV[3] value for the data key (optional).
-- Returns {1, token} when accepted, {0, last} when stale.
-- Tokens are compared as decimal strings (length, then digits), exactly at any size:
-- Lua numbers are doubles and would round above 2^53.
local function compare(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  return a < b and -1 or 1
end
local token = ARGV[1]
if not string.match(token, '^%d+$') then
  return redis.error_reply('fencing token must be a non-negative integer')
end
token = string.gsub(token, '^0+(%d)', '%1')
local last = redis.call('GET', KEYS[1])
local order = last and compare(token, last) or 1
if order > 0 or (ARGV[2] == '1' and order == 0) then
  redis.call('SET', KEYS[1], token)
  if KEYS[2] then redis.call('SET', KEYS[2], ARGV[3]) end
  return {1, token}
end
return {0, last}
