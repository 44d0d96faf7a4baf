"""The Lua scripts of the Redis Streams queue: each makes one step atomic on the server (an
idempotent submit, a result that wins once, a renewal of owned entries only, a cancel)."""

from __future__ import annotations

# KEYS: stream, [idem]. ARGV: job json, job id, ttl, field. Returns the owning job id.
SUBMIT_LUA = """
if KEYS[2] then
  if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'EX', ARGV[3]) then
    return redis.call('GET', KEYS[2])
  end
end
redis.call('XADD', KEYS[1], '*', ARGV[4], ARGV[1])
return ARGV[2]
"""

# KEYS: result, notify, stream, [dead]. ARGV: result, ttl, group, entry id,
# [job json, deliveries, dead maxlen]. Returns 1 if this write won.
COMPLETE_LUA = """
local won = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
if won then
  redis.call('LPUSH', KEYS[2], '1')
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
if KEYS[4] then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*',
             'job', ARGV[5], 'entry', ARGV[4], 'deliveries', ARGV[6])
end
-- pcall: a consumer group lost in a Redis restart must not undo the stored result.
redis.pcall('XACK', KEYS[3], ARGV[3], ARGV[4])
if won then return 1 end
return 0
"""

# KEYS: stream. ARGV: group, consumer, ids... Renews only entries this consumer still owns,
# so a late renewal never takes a job back from a consumer that reclaimed it.
RENEW_LUA = """
local renewed = 0
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    renewed = renewed + 1
  end
end
return renewed
"""

# KEYS: cancel marker, waiters, [idem]. ARGV: ttl, job id, leaving. A caller that left
# ("leaving" = 1) cancels only if it was the last one waiting on a shared job. Releases the
# idempotency record only if it still names this job, so a retry with the key runs it again.
CANCEL_LUA = """
if ARGV[3] == '1' then
  local left = redis.call('DECR', KEYS[2])
  if left > 0 then return left end
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
if KEYS[3] and redis.call('GET', KEYS[3]) == ARGV[2] then
  redis.call('DEL', KEYS[3])
end
return 0
"""
