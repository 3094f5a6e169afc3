-- release.lua: end a lease now (client release, or an operator's revoke). Idempotent.
--
-- Its keys (k) and arguments (a) are named in seats/protocol/calls.py (SPECS['release']):
--   k.cfg, k.leases, k.sessions, k.clients: the license's configuration and leases
--   k.deadlines, k.outbox: the shard's deadline index and events; a.event_prefix the
--     events' id prefix, a.event_type 'lease.released' or 'lease.revoked'
--   k.reply0, k.reply1: the license's reply hashes (generations 0 and 1), a.reply_field
--     this call's field in them, kept a.reply_ttl_ms
--   k.rate: the tenant's rate budget in this shard, a.rate_limit its calls per second
--     (0: none)
--   k.users: the license policy's live counts (_lib.lua's uncount)
--   k.queue, k.tickets, k.tdl (ticket deadlines), k.tix (the shard's ticket deadline
--     index): on a license with a wait queue, a seat this release frees is held for the
--     queue's head at once (_policy.lua's hold_for_queue)
--   k.units (the release before's weighted leases, _lib.lua's drop_units), k.wsum (the
--     weighted leases' extra seats, _lib.lua's add_weight)
--   k.idlers: a warned idle lease ended here leaves the license's idle index (_idle.lua)
--   k.ended: a lease released, lingering or revoked while a token of it may be valid is
--     noted there until its last token expires (_lib.lua's note_end), so no token brings
--     it back (acquire.lua's re-admission), and a revoke's heartbeat says so.
--
-- Linger: a client's release of its live lease on a license with linger_seconds > 0
-- keeps the seat held for that client (the lease stays in `leases` and the deadline
-- index with deadline = now + linger, its record marked lg = 1, clients[client_id]
-- kept) and records lease.lingering; the same client's acquire takes it back, and when
-- the deadline passes `reclaim` ends it as lease.released. A borrowed lease returned
-- early never lingers (returning it is giving the seat back), a revoke ends a lingering
-- lease at once, and a second release of a lingering lease is 'gone'. A linger never
-- outlives the license's term: under end_leases its deadline is at most the end (+ grace).
--
-- Returns (a repeat of the call: what its first run returned) one of
--   {'released', used, seats, lingering (0 or 1), now_ms}   the lease was live and is ended, or
--                               lingering (its seat is then still counted in `used`)
--   {'gone', used, seats, 0, now_ms}    unknown, already released (lingering) or already expired
--                               (an expired one is reclaimed)
--   {'missing'} | {'not_found'}
--   {'rate_limited', retry_ms}  over the tenant's budget (_ratelimit.lua); nothing changed
local tenant, license, sid = a.tenant_id, a.license_id, a.session_id
local prefix, etype = a.event_prefix, a.event_type
local reply_key, reply_ttl = reply_slot(k.reply0, k.reply1, a.reply_field), a.reply_ttl_ms
local lk = tenant .. '/' .. license
k.lk = lk

local done = replay(reply_key)
if done then return done end

local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
-- The call's one server time: the rate budget, the leases and the stored reply use it.
local now = now_ms()
-- (after the config: the call that fills it comes again and is counted once)
local wait = rate_limited(k.rate, a.rate_limit, now)
if wait then return {'rate_limited', wait} end
if cfg == 'not_found' then return {'not_found'} end

local score = tonumber(redis.call('ZSCORE', k.leases, sid))
if score and score > now then
  local rec = cjson.decode(redis.call('HGET', k.sessions, sid))
  local revoke = etype == 'lease.revoked'
  if rec.lg and not revoke then
    return remember(reply_key, reply_ttl, now,
      {'gone', in_use(k, now), cfg.seats, 0, now})
  end
  -- (a release is no idle reclaim, whatever cut its deadline: its note says released)
  if rec.x == 3 then rec.x = nil end
  -- its tokens are void from now on (a lingering lease too: its client released it)
  note_end(k, sid, rec, now, score, revoke)
  local linger = nil  -- the linger's end (nil: none, the seat is free now)
  if cfg.linger_ms > 0 and not revoke and not rec.b then
    linger = now + cfg.linger_ms
    local bound = cfg.terms and term_bound(load_terms(k.cfg, cfg.terms), now)
    if bound and linger > bound[1] then
      linger, rec.x = bound[1], bound[2]
      if linger <= now then linger = nil end
    end
  end
  if linger then
    local deadline = linger
    if rec.iw then  -- (released: a lingering lease is no idle one; _idle.lua)
      rec.iw = nil
      redis.call('ZREM', k.idlers, sid)
    end
    -- its tokens' end, kept while it lingers (a revoke or a cut later notes it; a take-back
    -- carries it on)
    rec.te = math.max(rec.te or 0, score)
    rec.lg = 1
    put_lease(k, lk, sid, rec, int_arg(deadline), score)
    local used = in_use(k, now)
    emit(k.outbox, prefix, now, {type = 'lease.lingering', tenant_id = tenant,
      license_id = license, session_id = sid, client_id = rec.c, seats_used = used,
      seats_total = cfg.seats, w = rec.w}, rec.m)
    return remember(reply_key, reply_ttl, now, {'released', used, cfg.seats, 1, now})
  end
  drop_lease(k, lk, sid, rec)  -- (its end is noted above)
  local used = in_use(k, now)
  emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant, license_id = license,
    session_id = sid, client_id = rec.c, seats_used = used, seats_total = cfg.seats,
    w = rec.w}, rec.m)
  if cfg.policy and k.queue then
    begin_policy()
    hold_for_queue(cjson.decode(cfg.policy), k, now, cfg.limit, used,
      {tenant = tenant, license = license, prefix = prefix, seats = cfg.seats})
  end
  return remember(reply_key, reply_ttl, now, {'released', used, cfg.seats, 0, now})
end
if score then
  reclaim(k, lk, tenant, license, sid, now, cfg.seats, prefix)
end
return remember(reply_key, reply_ttl, now, {'gone', in_use(k, now), cfg.seats, 0, now})
