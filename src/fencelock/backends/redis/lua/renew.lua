-- Compare-and-extend (redis://, and each Redlock node). KEYS[1] lock key; ARGV[1] owner,
-- ARGV[2] TTL in milliseconds. Returns 1 if the key was ours and now lives ARGV[2] ms, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
