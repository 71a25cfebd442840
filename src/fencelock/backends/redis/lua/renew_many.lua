-- Compare-and-extend many leases at once (the renewer's batch). KEYS: lock keys;
-- ARGV[i] the owner of KEYS[i], ARGV[#KEYS + i] its TTL in milliseconds. Returns, for
-- each key in order, 1 if it was that owner's and now lives that TTL, else 0.
local n = #KEYS
local renewed = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    renewed[i] = redis.call('PEXPIRE', KEYS[i], ARGV[n + i])
  else
    renewed[i] = 0
  end
end
return renewed
