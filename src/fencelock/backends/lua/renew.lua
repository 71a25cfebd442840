-- Compare-and-extend. KEYS[1] lock key; ARGV[1] owner, ARGV[2] TTL in milliseconds.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
