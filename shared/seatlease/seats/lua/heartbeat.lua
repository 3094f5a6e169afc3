-- heartbeat.lua: extend a live lease by its own lease length. A borrowed lease keeps its
-- deadline (the heartbeat only answers it); a lingering one was released by its client,
-- which must acquire to take it back: 'unknown'.
--
-- Its keys (k) and arguments (a) are named in seats/protocol/calls.py (SPECS['heartbeat']):
--   k.cfg, k.leases, k.sessions, k.clients: the license's configuration and leases
--   k.deadlines, k.outbox: the shard's deadline index and events; a.event_prefix the
--     events' id prefix
--   k.reply0, k.reply1: the license's reply hashes (generations 0 and 1), a.reply_field
--     this call's field in them, kept a.reply_ttl_ms
--   k.rate: the tenant's rate budget in this shard, a.rate_limit its calls per second
--     (0: none)
--   k.users: the license policy's live counts (_lib.lua's uncount)
--   k.units (the release before's weighted leases, _lib.lua's drop_units), k.wsum (the
--     weighted leases' extra seats, _lib.lua's add_weight: a weight costs nothing when its
--     lease's deadline moves)
--   k.ended (_lib.lua's note_end): an unknown session noted there as revoked is answered
--     {'revoked'} (its client learns that an operator freed its seat), one reclaimed for
--     being idle {'idle'}
--   k.idlers, a.idle_seconds ('' for not said), a.busy ('1' for busy): the product's
--     activity, judged by the license's idle rule (_idle.lua)
--
-- Over the budget, a heartbeat is refused ({'rate_limited', retry_ms}, nothing changed)
-- only when it cannot cost the lease: it came early (more than two thirds of the lease
-- left, i.e. before its interval), or the lease is borrowed (its deadline does not move)
-- or lingering. A heartbeat on schedule always passes, uncounted: at most one per lease
-- per interval, a load the license's seats bound. A refused one retries with two thirds
-- of its lease still ahead, and passes once its interval has come. A heartbeat of an
-- unknown session (no lease to lose) is counted and refused like any call.
--
-- The license's configuration is read on every heartbeat of a known session, so a change
-- (update, renewal) applies at once; a heartbeat that finds it not cached answers
-- {'missing'} and the engine fills it first: a lease is never extended on a term it did
-- not read. From the license's end (expires_at + grace) with end_leases the lease ends in
-- this call (lease.reclaimed, reason license_expired) and the answer is
-- {'license_expired', expires_ms, end_ms}; before it, no deadline goes past the end.
-- With keep_leases the lease goes on. Before the license's start (moved later while the
-- lease was held) it ends the same way (reason license_not_started) and the answer is
-- {'not_started', starts_ms}. A borrowed lease's deadline does not move, but it too never
-- outlives the term (cut here should the operator's cut have missed it).
--
-- Idle seats (_idle.lua): a lease warned for being idle is answered with its tail
-- 'i:<ms>', when it is reclaimed unless activity (or busy) comes first; one whose
-- deadline was cut to that time for it and has passed is reclaimed now, reason idle, and
-- answered {'idle'}.
--
-- Returns (a repeat of the call: what its first run returned) one of
--   {'ok', deadline_ms, lease_ms, now_ms, borrowed (0 or 1), client_id}
--     + for a license with terms: expires_ms, end_ms, flags, entitlements, max_version
--     + for a lease of weight w > 1: w (weighted_tail in _lib.lua)
--     + for a borrowed lease bound to a machine: 'm:<fingerprint>' (machine_tail)
--     + for a lease of a user the policy judges: 'u:<user>' (its token carries it)
--     + for a lease warned for being idle: 'i:<reclaim at ms>'
--   {'expired'}   the deadline had passed: the lease is reclaimed now (lease.reclaimed)
--   {'unknown'}   no such session (released, reclaimed, revoked or never existed), or a
--                 lingering one (ended now if its linger is over: lease.released)
--   {'revoked'}   no such session: an operator revoked it (while its tokens last)
--   {'idle'}      reclaimed for being idle (now, or before: while its tokens last)
--   {'license_expired', expires_ms, end_ms} | {'not_started', starts_ms}
--   {'missing'} | {'not_found'}   the configuration is not cached (or, for an unknown
--                 session: is the license real?)
local tenant, license, sid, prefix = a.tenant_id, a.license_id, a.session_id, a.event_prefix
local reply_key, reply_ttl = reply_slot(k.reply0, k.reply1, a.reply_field), a.reply_ttl_ms
local lk = tenant .. '/' .. license

local done = replay(reply_key)
if done then return done end

local score = tonumber(redis.call('ZSCORE', k.leases, sid))
local now = now_ms()
if not score then
  local cfg = load_config(k.cfg)
  if cfg == nil then return {'missing'} end
  if cfg == 'not_found' then return {'not_found'} end
  -- No lease to lose: an unknown session's heartbeat is counted like any call.
  local wait = rate_limited(k.rate, a.rate_limit, now)
  if wait then return {'rate_limited', wait} end
  local note = k.ended and ended_note(k, sid, now)
  if note == 'revoked' or note == 'idle' then return {note} end
  return {'unknown'}
end

local has = redis.call('HMGET', k.cfg, 'exists', 'terms', 'seats', 'idle')
if not has[1] then return {'missing'} end
local raw = redis.call('HGET', k.sessions, sid)
local rec = raw and cjson.decode(raw) or {}
local T = nil
if has[2] then T = load_terms(k.cfg, has[2]) end
local wait = rate_limited(k.rate, a.rate_limit, now)
-- (a warned lease's heartbeat that takes the warning back always passes: at most one a
-- warning, and refusing it would cost the lease its seat for activity it reported)
local cancels = rec.iw and (a.busy == '1' or a.idle_seconds == '' or not has[4]
  or tonumber(a.idle_seconds) * 1000 < (idle_rule(has[4]) or 0))
if wait and not cancels and (rec.b or rec.lg or score - now > (rec.l or 0) * 2 / 3) then
  return {'rate_limited', wait}
end
local early = T and T.starts and now < T.starts
local ending = T and T.fin and not T.keep and now >= T.fin
if score <= now or ((ending or early) and not rec.lg) then
  if (ending or early) and (not rec.x or rec.x == 3) then  -- the term ended (or moved): say so
    rec.x = early and 2 or 1
    redis.call('HSET', k.sessions, sid, cjson.encode(rec))
  end
  reclaim(k, lk, tenant, license, sid, now, has[3] or '', prefix, score)
  if rec.lg then return remember(reply_key, reply_ttl, now, {'unknown'}) end
  if early then return remember(reply_key, reply_ttl, now, {'not_started', T.starts}) end
  if ending then
    return remember(reply_key, reply_ttl, now, {'license_expired', T.exp, T.fin})
  end
  if rec.x == 3 then return remember(reply_key, reply_ttl, now, {'idle'}) end
  return remember(reply_key, reply_ttl, now, {'expired'})
end
if rec.lg then return remember(reply_key, reply_ttl, now, {'unknown'}) end
local reply
local bound = term_bound(T, now)
if rec.b then
  if bound and score > bound[1] then  -- a borrow outlives no term
    local before = score
    score, rec.x = bound[1], bound[2]
    put_lease(k, lk, sid, rec, int_arg(score), before)
  end
  reply = {'ok', score, rec.l, now, 1, rec.c}
  if T then terms_tail(reply, T, now, rec.x == 1) end
  return remember(reply_key, reply_ttl, now,
    user_tail(machine_tail(weighted_tail(reply, rec.w), rec.f), rec.u))
end

local deadline = now + rec.l
local cut = false
if bound and deadline > bound[1] then deadline, cut = bound[1], true end
-- (a license without an idle rule, and a lease never warned, read nothing more)
local warned, idle_changed, idle_cut = nil, false, false
if has[4] or rec.iw then
  local always
  warned, idle_changed, always = idle_heartbeat(k, a, sid, rec, has[4], now, a.idle_seconds,
    a.busy)
  if warned and always and warned <= now then
    -- its time came while the rule reclaimed only when needed: 'always' reclaims it now
    rec.x = 3
    reclaim(k, lk, tenant, license, sid, now, has[3] or '', prefix, score, rec)
    return remember(reply_key, reply_ttl, now, {'idle'})
  end
  if warned and always and warned < deadline then deadline, cut, idle_cut = warned, false, true end
end
local x = (cut and 1) or (idle_cut and 3) or nil
-- (the record is written only when something in it changes: most renewals move the
-- deadline alone)
local changed = idle_changed or x ~= rec.x or (T ~= nil) ~= (rec.tm == 1)
rec.x, rec.tm = x, T and 1 or nil
put_lease(k, lk, sid, rec, int_arg(deadline), score, changed)
reply = {'ok', deadline, rec.l, now, 0, rec.c}
if T then terms_tail(reply, T, now, cut) end
reply = user_tail(weighted_tail(reply, rec.w), rec.u)
if warned then reply[#reply + 1] = 'i:' .. int_arg(warned) end
return remember(reply_key, reply_ttl, now, reply)
