-- reclaim.lua: the reaper's batch reclaim of expired leases in one shard.
-- Each candidate came from ZRANGEBYSCORE on the deadline index; its deadline is checked
-- again here, so a lease heartbeated since that read is left alone, and a lease that
-- another reaper already reclaimed is skipped (never reclaimed twice).
--
-- KEYS[1] deadlines (shard)   KEYS[2] outbox (shard)
-- then six keys per candidate i (base = 2 + 6 * (i - 1)):
--   KEYS[base+1] leases   KEYS[base+2] sessions   KEYS[base+3] clients   KEYS[base+4] cfg
--   KEYS[base+5] users (the license policy's live counts, _lib.lua's uncount)
--   KEYS[base+6] units (a weighted lease's other seats, _lib.lua's set_units)
-- ARGV[1] event id prefix, then three per candidate: tenant_id, license_id, session_id
--
-- Returns the number of leases reclaimed.
local deadlines, outbox, prefix = KEYS[1], KEYS[2], ARGV[1]
local now = now_ms()
local reclaimed = 0
local n = (#ARGV - 1) / 3
for i = 1, n do
  local base = 2 + 6 * (i - 1)
  local tenant, license, sid = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local lk = tenant .. '/' .. license
  local score = tonumber(redis.call('ZSCORE', deadlines, lk .. '|' .. sid))
  if score and score <= now then
    local k = {leases = KEYS[base + 1], sessions = KEYS[base + 2], clients = KEYS[base + 3],
               deadlines = deadlines, outbox = outbox, users = KEYS[base + 5],
               units = KEYS[base + 6]}
    local total = redis.call('HGET', KEYS[base + 4], 'seats') or ''
    if reclaim(k, lk, tenant, license, sid, now, total, prefix) then
      reclaimed = reclaimed + 1
    end
  end
end
return reclaimed
