-- reclaim.lua: the reaper's batch reclaim of expired leases in one shard.
-- Each candidate came from ZRANGEBYSCORE on the deadline index; its deadline is checked
-- again here, so a lease heartbeated since that read is left alone, and a lease that
-- another reaper already reclaimed is skipped (never reclaimed twice). A seat freed on a
-- license whose wait queue has clients waiting is held for the queue's head in the same
-- call (_policy.lua's hold_for_queue), as a release does: the hold starts by the
-- reaper's run at the latest, whether or not anybody calls.
--
-- k.deadlines, k.outbox, k.tix: the shard's deadline index, events and ticket deadline
-- index
-- k.candidates[i]: the i-th candidate's license's keys: leases, sessions, clients, cfg,
--   users (the license policy's live counts, _lib.lua's uncount), units (the release
--   before's weighted leases), wsum (the weighted leases' extra seats, _lib.lua's
--   add_weight), queue, tickets, tdl (ticket deadlines), idlers (the warned idle leases,
--   _idle.lua), ended (a lease whose deadline a
--   call moved down is noted there while a token of it may still be valid: _lib.lua's
--   note_end)
-- a.event_prefix: the events' id prefix
-- a.candidates[i]: the i-th candidate's tenant_id, license_id and session_id
--
-- Returns the number of leases reclaimed.
local deadlines, outbox, prefix = k.deadlines, k.outbox, a.event_prefix
local now = now_ms()
-- Every candidate's lease is dropped first, then each license's seats in use are counted
-- once for the events of all its leases (expired leases do not change that count).
local ended = {}  -- {k, tenant, license, sid, rec, total}
local licenses = {}  -- lk -> {k, tenant, license, total}, in the order first met
local order = {}
for i, c in ipairs(a.candidates) do
  local tenant, license, sid = c.tenant_id, c.license_id, c.session_id
  local lk = tenant .. '/' .. license
  local score = tonumber(redis.call('ZSCORE', deadlines, lk .. '|' .. sid))
  if score and score <= now then
    local L = licenses[lk]
    if not L then
      -- the candidate's license keys, with the shard's, as the helpers take them
      local lic = k.candidates[i]
      lic.deadlines, lic.outbox, lic.tix, lic.lk = deadlines, outbox, k.tix, lk
      L = {k = lic, tenant = tenant, license = license,
           total = redis.call('HGET', lic.cfg, 'seats') or ''}
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
      begin_policy()
      hold_for_queue(cjson.decode(cfg.policy), L.k, now, cfg.limit, L.used,
        {tenant = L.tenant, license = L.license, prefix = prefix, seats = cfg.seats})
    end
  end
end
return #ended
