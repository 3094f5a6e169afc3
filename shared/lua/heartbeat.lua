-- heartbeat.lua: extend a live lease by its own lease length.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] clients
-- KEYS[5] deadlines (shard)      KEYS[6] outbox (shard)
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] session_id   ARGV[4] event id prefix
--
-- Returns one of
--   {'ok', deadline_ms, lease_ms, now_ms}
--   {'expired'}   the deadline had passed: the lease is reclaimed now (lease.reclaimed)
--   {'unknown'}   no such session (released, reclaimed, revoked or never existed)
--   {'missing'} | {'not_found'}   only for an unknown session: is the license real?
local k = {cfg = KEYS[1], leases = KEYS[2], sessions = KEYS[3], clients = KEYS[4],
           deadlines = KEYS[5], outbox = KEYS[6]}
local tenant, license, sid, prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local lk = tenant .. '/' .. license

local score = tonumber(redis.call('ZSCORE', k.leases, sid))
if not score then
  local cfg = load_config(k.cfg)
  if cfg == nil then return {'missing'} end
  if cfg == 'not_found' then return {'not_found'} end
  return {'unknown'}
end

local now = now_ms()
if score <= now then
  reclaim(k, lk, tenant, license, sid, now, redis.call('HGET', k.cfg, 'seats') or '', prefix)
  return {'expired'}
end

local rec = cjson.decode(redis.call('HGET', k.sessions, sid))
local deadline = now + rec.l
redis.call('ZADD', k.leases, deadline, sid)
redis.call('ZADD', k.deadlines, deadline, lk .. '|' .. sid)
return {'ok', deadline, rec.l, now}
