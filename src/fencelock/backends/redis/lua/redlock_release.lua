-- Redlock release on one node: compare-and-delete, then wake the waiters.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] release channel ('' to wake nobody: undoing
-- a failed try must not wake its rivals into another split vote).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], '1') end
  return 1
end
return 0
