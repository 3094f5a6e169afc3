-- reclaim.lua: the reaper's batch reclaim of expired leases in one shard.
-- Each candidate came from ZRANGEBYSCORE on the deadline index; its deadline is checked
-- again here, so a lease heartbeated since that read is left alone, and a lease that
-- another reaper already reclaimed is skipped (never reclaimed twice). A seat freed on a
-- license whose wait queue has clients waiting is held for the queue's head in the same
-- call (_policy.lua's hold_for_queue), as a release does: the hold starts by the
-- reaper's run at the latest, whether or not anybody calls.
--
-- KEYS[1] deadlines (shard)   KEYS[2] outbox (shard)   KEYS[3] the shard's ticket
-- deadline index
-- then eleven keys per candidate i (base = 3 + 11 * (i - 1)):
--   KEYS[base+1] leases   KEYS[base+2] sessions   KEYS[base+3] clients   KEYS[base+4] cfg
--   KEYS[base+5] users (the license policy's live counts, _lib.lua's uncount)
--   KEYS[base+6] units (the release before's weighted leases)   KEYS[base+7] wsum (the
--   weighted leases' extra seats, _lib.lua's add_weight)
--   KEYS[base+8] queue   KEYS[base+9] tickets   KEYS[base+10] ticket deadlines
--   KEYS[base+11] ended (a lease whose deadline a call moved down is noted there while
--   a token of it may still be valid: _lib.lua's note_end)
-- ARGV[1] event id prefix, then three per candidate: tenant_id, license_id, session_id
--
-- Returns the number of leases reclaimed.
local deadlines, outbox, prefix = KEYS[1], KEYS[2], ARGV[1]
local now = now_ms()
local n = (#ARGV - 1) / 3
-- Every candidate's lease is dropped first, then each license's seats in use are counted
-- once for the events of all its leases (expired leases do not change that count).
local ended = {}  -- {k, tenant, license, sid, rec, total}
local licenses = {}  -- lk -> {k, tenant, license, total}, in the order first met
local order = {}
for i = 1, n do
  local base = 3 + 11 * (i - 1)
  local tenant, license, sid = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local lk = tenant .. '/' .. license
  local score = tonumber(redis.call('ZSCORE', deadlines, lk .. '|' .. sid))
  if score and score <= now then
    local L = licenses[lk]
    if not L then
      L = {k = {leases = KEYS[base + 1], sessions = KEYS[base + 2], clients = KEYS[base + 3],
                cfg = KEYS[base + 4], deadlines = deadlines, outbox = outbox,
                users = KEYS[base + 5], units = KEYS[base + 6], wsum = KEYS[base + 7],
                queue = KEYS[base + 8], tickets = KEYS[base + 9], tdl = KEYS[base + 10],
                ended = KEYS[base + 11], tix = KEYS[3], lk = lk},
           tenant = tenant, license = license,
           total = redis.call('HGET', KEYS[base + 4], 'seats') or ''}
      licenses[lk] = L
      order[#order + 1] = lk
    end
    local rec = drop_lease(L.k, lk, sid, nil, now)
    if rec then ended[#ended + 1] = {L = L, sid = sid, rec = rec} end
  end
end
for _, lk in ipairs(order) do licenses[lk].used = in_use(licenses[lk].k, now) end
for _, e in ipairs(ended) do
  local L = e.L
  emit_end(L.k, L.tenant, L.license, e.sid, e.rec, now, L.total, prefix, L.used)
end
-- The seats freed go to the licenses' queues (a license with clients waiting only: the
-- rest pay one EXISTS)
for _, lk in ipairs(order) do
  local L = licenses[lk]
  if redis.call('EXISTS', L.k.queue) == 1 then
    local cfg = load_config(L.k.cfg)
    if type(cfg) == 'table' and cfg.policy then
      define_policy()
      hold_for_queue(cjson.decode(cfg.policy), L.k, now, cfg.limit, L.used,
        {tenant = L.tenant, license = L.license, prefix = prefix, seats = cfg.seats})
    end
  end
end
return #ended
