-- release.lua: end a lease now (client release, or an operator's revoke). Idempotent.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] clients
-- KEYS[5] deadlines (shard)      KEYS[6] outbox (shard)
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] session_id   ARGV[4] event id prefix
-- ARGV[5] event type: 'lease.released' or 'lease.revoked'
--
-- Returns one of
--   {'released', used, seats}   the lease was live and is gone
--   {'gone', used, seats}       unknown or already expired (an expired one is reclaimed)
--   {'missing'} | {'not_found'}
local k = {cfg = KEYS[1], leases = KEYS[2], sessions = KEYS[3], clients = KEYS[4],
           deadlines = KEYS[5], outbox = KEYS[6]}
local tenant, license, sid, prefix, etype = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lk = tenant .. '/' .. license

local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
if cfg == 'not_found' then return {'not_found'} end

local now = now_ms()
local score = tonumber(redis.call('ZSCORE', k.leases, sid))
if score and score > now then
  local rec = drop_lease(k.leases, k.sessions, k.clients, k.deadlines, lk, sid)
  local used = live_count(k.leases, now)
  emit(k.outbox, prefix, etype, tenant, license, sid, rec.c, now, used, cfg.seats, rec.m)
  return {'released', used, cfg.seats}
end
if score then
  reclaim(k, lk, tenant, license, sid, now, cfg.seats, prefix)
end
return {'gone', live_count(k.leases, now), cfg.seats}
