-- _ratelimit.lua: a tenant's call budget, shared by every function instance. scripts.py
-- prepends it (after _lib.lua) to acquire.lua, heartbeat.lua and release.lua, so the
-- check is part of the seat call's one EVALSHA.
--
-- The algorithm is GCRA (the generic cell rate algorithm, as redis-cell implements it):
-- the key holds the tenant's *theoretical arrival time* (TAT, ms, Redis server time): when
-- its budget would be spent if every call so far had come exactly 1/rate apart. A call at
-- `now` fits while TAT - now <= the burst tolerance (one second's worth of calls, less
-- one); it moves TAT one interval (1000/rate ms) later. A refused call changes nothing,
-- so a flood never pushes the budget further out. One key per tenant and shard:
-- `sl:{shard}:rate:<tenant>` (shared/seatlease/seats/keys.py), in the slot of the license's
-- keys, so the script stays in one slot on Redis Cluster (docs/design.md, "Rate limits").
-- It expires when the budget is whole again: an idle tenant holds nothing.

-- Nil when the call fits in the budget (and is counted), else the milliseconds until one
-- would. `per_second` (ARGV text) 0 or absent: no limit, nothing read or written. `now`:
-- the call's server time (ms), which the script has read (one TIME a call).
local function rate_limited(key, per_second, now)
  per_second = tonumber(per_second) or 0
  if per_second <= 0 then return nil end
  local interval = 1000 / per_second
  local tolerance = 1000 - interval
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  if tat - now > tolerance then
    return math.ceil(tat - now - tolerance)
  end
  tat = tat + interval
  -- pcall: when Redis is full (noeviction) this write is refused, and the call goes on
  -- uncounted; its own writes then decide (an acquire is refused, a release still frees).
  redis.pcall('SET', key, int_arg(tat), 'PX', int_arg(math.ceil(tat - now)))
  return nil
end
