-- A fair waiter gives up: leave the queue, and wake the others if the lease is free,
-- since the waiter behind us may now be first.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] liveness; ARGV[1] owner, ARGV[2] release channel.
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], '1')
end
return 1
