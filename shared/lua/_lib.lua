-- _lib.lua: helpers shared by every seat script. shared/scripts.py prepends this file
-- to each script before registering it, so a script is still one EVALSHA.
--
-- Key layout (all keys of one call share the hash tag {shard}, see shared/keys.py):
--   leases    ZSET  session_id -> deadline (ms, Redis server time); live iff deadline > now
--   sessions  HASH  session_id -> JSON {"c": client_id, "a": acquired_ms, "l": lease_ms,
--                   "m": metadata JSON text, "t": the license's seats at acquire}
--   clients   HASH  client_id -> session_id (re-acquire by the same client returns its lease)
--   deadlines ZSET  per shard: "<tenant>/<license>|<session_id>" -> deadline (the reaper's index)
--   outbox    STREAM per shard: one entry per lease event, drained by the reaper to Pub/Sub
--   cfg       HASH  cached license configuration (exists, seats, lease_seconds, ...)

-- Milliseconds from the Redis server clock: function instances' clocks differ.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Event ids are "<prefix>-<n>": the prefix is random per call (from Python), n counts
-- the events this call wrote, so ids stay unique even if Redis loses its data.
local event_seq = 0

local function emit(outbox, prefix, etype, tenant, license, sid, client, at, used, total, meta)
  event_seq = event_seq + 1
  redis.call('XADD', outbox, '*',
    'event_id', prefix .. '-' .. event_seq, 'type', etype,
    'tenant_id', tenant, 'license_id', license, 'session_id', sid, 'client_id', client,
    'at', at, 'used', used, 'total', total, 'meta', meta)
end

-- Live leases of a license at `now`.
local function live_count(leases, now)
  return redis.call('ZCOUNT', leases, '(' .. now, '+inf')
end

-- Removes one lease from every structure that knows it. Returns its record, or nil
-- when the session was unknown.
local function drop_lease(leases, sessions, clients, deadlines, lk, sid)
  local raw = redis.call('HGET', sessions, sid)
  redis.call('ZREM', leases, sid)
  redis.call('HDEL', sessions, sid)
  redis.call('ZREM', deadlines, lk .. '|' .. sid)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if redis.call('HGET', clients, rec.c) == sid then
    redis.call('HDEL', clients, rec.c)
  end
  return rec
end

-- Reclaims the lease `sid` (its deadline has passed) and records lease.reclaimed.
local function reclaim(k, lk, tenant, license, sid, now, total, prefix)
  local rec = drop_lease(k.leases, k.sessions, k.clients, k.deadlines, lk, sid)
  if rec then
    -- The config cache may have expired while the lease was held (heartbeats do not
    -- refresh it): fall back to the seat count recorded when the lease was taken.
    if total == '' then total = rec.t or '' end
    emit(k.outbox, prefix, 'lease.reclaimed', tenant, license, sid, rec.c, now,
      live_count(k.leases, now), total, rec.m)
  end
  return rec
end

-- Reclaims at most `limit` expired leases of one license; returns how many.
local function reclaim_expired(k, lk, tenant, license, now, total, prefix, limit)
  local expired = redis.call('ZRANGEBYSCORE', k.leases, '-inf', now, 'LIMIT', 0, limit)
  for _, sid in ipairs(expired) do
    reclaim(k, lk, tenant, license, sid, now, total, prefix)
  end
  return #expired
end

-- The license's configuration from its cache hash, or nil when not cached.
-- Returns 'not_found' for a cached negative entry (license does not exist).
-- (HMGET of the known fields: cheaper than HGETALL plus a Lua loop.)
local function load_config(cfg_key)
  local v = redis.call('HMGET', cfg_key, 'exists', 'seats', 'lease_seconds',
    'max_lease_seconds', 'overage_percent', 'suspended')
  if not v[1] then return nil end
  if v[1] ~= '1' then return 'not_found' end
  local seats = tonumber(v[2])
  return {seats = seats, lease_ms = tonumber(v[3]) * 1000, max_lease_ms = tonumber(v[4]) * 1000,
          limit = math.floor(seats * (100 + tonumber(v[5])) / 100), suspended = v[6]}
end
