-- acquire.lua: take a seat on a license, or extend the caller's live lease.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] clients
-- KEYS[5] deadlines (shard)      KEYS[6] outbox (shard)   KEYS[7] denials (shard)
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] client_id
-- ARGV[4] session id to use for a new lease (random, from Python)
-- ARGV[5] requested lease in seconds, 0 for the license's default
-- ARGV[6] metadata as JSON text   ARGV[7] event id prefix
--
-- Returns one of
--   {'missing'}                 config not cached: fill KEYS[1] and call again
--   {'not_found'} | {'suspended'} | {'lease_too_long', max_lease_seconds}
--   {'denied', used, seats, limit, retry_after_ms}
--   {'acquired' | 'renewed', session_id, deadline_ms, lease_ms, used, seats, limit, now_ms}
local k = {cfg = KEYS[1], leases = KEYS[2], sessions = KEYS[3], clients = KEYS[4],
           deadlines = KEYS[5], outbox = KEYS[6], denials = KEYS[7]}
local tenant, license, client = ARGV[1], ARGV[2], ARGV[3]
local new_sid, requested, meta, prefix = ARGV[4], tonumber(ARGV[5]) * 1000, ARGV[6], ARGV[7]
local lk = tenant .. '/' .. license

local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
if cfg == 'not_found' then return {'not_found'} end
if cfg.suspended == '1' then return {'suspended'} end
if requested > cfg.max_lease_ms then return {'lease_too_long', cfg.max_lease_ms / 1000} end
local lease_ms = cfg.lease_ms
if requested > 0 then lease_ms = requested end

local now = now_ms()
-- Prune this license's expired leases first, so the count below is exact even when the
-- reaper is late (bounded per call; ZCOUNT ignores any expired lease left behind).
local pruned = reclaim_expired(k, lk, tenant, license, now, cfg.seats, prefix, 100)

local deadline = now + lease_ms
local held = redis.call('HGET', k.clients, client)
if held then
  local score = tonumber(redis.call('ZSCORE', k.leases, held))
  if score and score > now then
    local rec = cjson.decode(redis.call('HGET', k.sessions, held))
    rec.l = lease_ms
    redis.call('HSET', k.sessions, held, cjson.encode(rec))
    redis.call('ZADD', k.leases, deadline, held)
    redis.call('ZADD', k.deadlines, deadline, lk .. '|' .. held)
    return {'renewed', held, deadline, lease_ms, live_count(k.leases, now), cfg.seats,
            cfg.limit, now}
  end
  reclaim(k, lk, tenant, license, held, now, cfg.seats, prefix)
end

-- Under the prune limit every expired lease is gone, so ZCARD is the live count.
local used
if pruned < 100 then
  used = redis.call('ZCARD', k.leases)
else
  used = live_count(k.leases, now)
end
if used >= cfg.limit then
  -- Denials are counters (one field per license), not events: a retry storm cannot grow
  -- Redis. The reaper turns them into lease.denied events.
  redis.call('HINCRBY', k.denials, lk, 1)
  local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. now, '+inf', 'WITHSCORES',
    'LIMIT', 0, 1)
  local retry_ms = 1000
  if #first > 0 then retry_ms = tonumber(first[2]) - now end
  return {'denied', used, cfg.seats, cfg.limit, retry_ms}
end

redis.call('ZADD', k.leases, deadline, new_sid)
redis.call('HSET', k.sessions, new_sid, cjson.encode({c = client, a = now, l = lease_ms, m = meta,
  t = cfg.seats}))
redis.call('HSET', k.clients, client, new_sid)
redis.call('ZADD', k.deadlines, deadline, lk .. '|' .. new_sid)
emit(k.outbox, prefix, 'lease.acquired', tenant, license, new_sid, client, now, used + 1,
  cfg.seats, meta)
return {'acquired', new_sid, deadline, lease_ms, used + 1, cfg.seats, cfg.limit, now}
