-- acquire.lua: take a seat on a license, or extend (or take back) the caller's lease.
--
-- Its keys (k) and arguments (a) are named in seats/protocol/calls.py (SPECS['acquire']);
-- the notes here say what each means to this script.
--   k.cfg, k.leases, k.sessions, k.clients: the license's configuration and leases
--   k.deadlines, k.outbox, k.denials: the shard's deadline index, events and denial counts
--   k.reply0, k.reply1: the license's reply hashes (generations 0 and 1), a.reply_field
--     this call's field in them (idempotency, see replay in _lib.lua), kept a.reply_ttl_ms
--   a.new_session_id: the session id of a new lease (random, from Python)
--   a.lease_seconds: the lease asked for, 0 for the license's default; a.borrow_seconds:
--     a borrow, 0 for a lease that heartbeats (Python never sends both)
--   a.metadata: JSON text; a.event_prefix: the events' id prefix
--   k.rate: the tenant's rate budget in this shard, a.rate_limit its calls per second
--     (0: none)
--   k.users, k.queue, k.tickets, k.tdl (ticket deadlines), k.tix (the shard's ticket
--     deadline index, the reaper's): the policy's and the queue's state, read only on a
--     license with a policy (_policy.lua)
--   a.user ('' for none); a.queue '1' to wait in the queue; a.ticket the ticket the caller
--     holds ('' for none); a.new_ticket the ticket of a new place in line (random)
--   a.entitlements: the entitlements the product needs, space separated ('' for none);
--     a.version: the product's version as comparable text (version_text; '' for none)
--   k.units (the release before's weighted leases, _lib.lua's drop_units), k.wsum (the
--     weighted leases' extra seats, _lib.lua's add_weight)
--   a.seats: the seats the lease counts as ('' for not said: 1 for a new lease, a held
--     lease's own weight for a renewal)
--   a.fingerprint: the machine asking ('' for none): a borrowed lease keeps the machine it
--     was borrowed for (rec.f)
--   a.failover_began_ms: when a failover's recovery began (`seatlease failover begin`; ''
--     for none): until one heartbeat interval of the license's longest lease (+ 5 s) has
--     passed, a new grant waits ({'recovering', retry_ms}) unless the license chose
--     availability (cfg 'fo' = 'grant': then granted, its reply and event saying so);
--     renewals go on
--   k.refused, k.refusing (the license's refused clients, _refusals.lua), k.refused_due
--     (the shard's index of them); a.shown_user: the user as the metadata shows it. A
--     refusal for want of seats ('denied', 'queue_full', and 'queued': waiting) is noted
--     per client and minute; a new grant marks the client's noted refusals served.
--   k.ended (_lib.lua's note_end): a lingering lease taken back is no longer ended
--   k.lmax: the longest lease granted recently (_lib.lua's note_lease_length)
--   k.mark: the shard's mark (_lib.lua's shard_mark); k.recovered: the shard's count of
--     re-admissions (`seatlease failover status` sums them)
--
-- Re-admission by a lease token (docs/design.md, "A region lost"): a.token_session_id
-- the verified token's session id ('' for none), a.token_exp_ms its exp, a.token_iat_ms
-- its iat, a.token_seats its weight, a.token_borrowed '1' for a borrow, a.token_machine
-- its machine ('' for none), a.token_user its user (usr, '' for none: the call's user
-- must be it); a.readmit_for 'heartbeat' for a heartbeat's re-admission ('' for an
-- acquire); a.audit_verdict the audit trail's verdict on the session ('' not asked yet;
-- 'clear', 'ended', 'revoked').
-- The token's lease comes back only when this Redis lost it, never when the service ended
-- it: the token has not expired; the session is not live here; no call moved its deadline
-- below the token's (its record's te) and no end of it is noted (note_end); a recovery
-- window is open for the license (recovery_ends), or the token is a borrow's (offline for
-- days, it may come back later); and when this Redis's data of the shard is younger than
-- the token (its mark after the token's iat: the data was lost since), the audit trail
-- has no end of it either ({'consult_audit', mark_ms}: the engine asks, then calls again
-- with the verdict; nothing was written, and the second call is not counted again). It
-- then passes every rule a new grant passes, in this call: the rate budget, suspension,
-- the term, entitlements and version, the deny list, the per-user limit, reservations,
-- the seat held for the queue's head and the cap; the cap alone does not bind a borrow,
-- nor a license that chose availability ('fo' = 'grant') in a window. It is re-created
-- with its session id and weight (a borrow until its exp, bound to its machine; else a
-- lease of the call's length), answered {'recovered', ...} as a renewal is, one event
-- lease.recovered (metadata.reason: 'failover', 'data_lost' or 'borrow'). Otherwise an
-- acquire goes on as a new one (a new session); a heartbeat's re-admission answers
-- {'not_readmitted', why} and changes nothing.
--
-- A license with terms (cfg 'terms', load_terms in _lib.lua): nothing is granted before
-- `starts` or from `fin` (expires_at + grace) on; with end_leases no deadline goes past
-- `fin` (cut to it: the record gets x = 1, and its reclaim says "license_expired"); the
-- needed entitlements must all be the license's, the version at most its max_version.
--
-- A weighted lease (w seats, rec.w) counts w against the cap, the per-user limit and a
-- group's reservation; a ticket of weight w (t.w) waits until w seats are free for it
-- (_policy.lua's serve_queue). A held lease keeps its weight: asking another is refused,
-- but for a lingering one, which its client may take back with another weight (decided
-- as a new lease would be, its own seats counted as free for it; refused, it lingers on).
--
-- The caller's own lease (clients[client_id], deadline still ahead):
--   borrowed            returned unchanged: a borrow ends when it ends, or by release;
--                       asked from another machine (a.fingerprint not rec.f): machine_mismatch
--   lingering (lg)      taken back: lg cleared, deadline = now + lease (lease.renewed)
--   either, with a.borrow_seconds > 0 and not borrowed: becomes borrowed, deadline = now + borrow
--                       (lease.converted), bound to a.fingerprint's machine
--   live otherwise      extended by the lease (no event)
--
-- Returns (a repeat of the call: what its first run returned) one of
--   {'missing'}                 config not cached: fill k.cfg and call again
--   {'rate_limited', retry_ms}  over the tenant's budget (_ratelimit.lua); nothing changed
--   {'not_found'} | {'suspended'} | {'lease_too_long', max_lease_seconds}
--   {'borrow_too_long', max_borrow_seconds}   (0: the license does not lend seats)
--   {'denied', used, seats, limit, retry_after_ms}
--   with a policy: {'user_required'} | {'user_denied'} | {'user_limit', max_per_user, held,
--       retry_after_ms (until the user's earliest lease ends)}
--     | {'denied', used, seats, limit, retry_after_ms, held, reserved}: `held` free seats
--       are held for tickets ahead in the queue (retry_after_ms: until the first hold
--       ends), `reserved` free seats are reserved for groups the caller is not in
--     | {'queued', position, ticket, retry_after_ms, used, seats}
--     | {'queue_full', queue_max, waiting, used, seats}   no room for a new place in line
--   {'too_many_seats', seats}   more seats asked than the license has
--   {'seats_mismatch', held_weight, asked}   the caller's live lease counts another weight
--   {'machine_mismatch'}        the caller's borrowed lease was borrowed for another machine
--   {'recovering', retry_ms}    a failover's recovery window: no new grant yet (not kept
--                               for a repeat, as 'rate_limited')
--   {'consult_audit', mark_ms} | {'not_readmitted', why}   (re-admission, above)
--   {'not_started', starts_ms} | {'license_expired', expires_ms, end_ms}
--   {'not_entitled', 'name name'} (the missing ones) | {'version_not_entitled', max_version}
--   {'acquired' | 'renewed' | 'recovered', session_id, deadline_ms, lease_ms, used, seats,
--    limit, now_ms, borrowed (0 or 1)}   lease_ms of a borrowed lease is the borrow's length
--    + for a license with terms: expires_ms, end_ms, flags, entitlements, max_version
--      (terms_tail in _lib.lua)
--    + for a lease of weight w > 1: w (weighted_tail in _lib.lua)
--    + for a borrowed lease bound to a machine: 'm:<fingerprint>' (machine_tail)
--    + for a lease of a user the policy judges: 'u:<user>' (its tokens carry it: a
--      re-admission is judged as the user's)
--    + for a grant in a failover's recovery window: 'r:<window end ms>' (recovering_tail)
local tenant, license, client = a.tenant_id, a.license_id, a.client_id
local new_sid, meta, prefix = a.new_session_id, a.metadata, a.event_prefix
local requested = tonumber(a.lease_seconds) * 1000
local reply_key, reply_ttl = reply_slot(k.reply0, k.reply1, a.reply_field), a.reply_ttl_ms
local borrow = tonumber(a.borrow_seconds or 0) * 1000
local lk = tenant .. '/' .. license
k.lk = lk
local user = a.user or ''
local asked = tonumber(a.seats or '')  -- nil: not said
local w = asked or 1
local machine = a.fingerprint or ''
local failover_began = tonumber(a.failover_began_ms or '')
local shown_user = a.shown_user or ''

local done = replay(reply_key)
if done then return done end


local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
-- The call's one server time: the rate budget, the leases and the stored reply use it.
local now = now_ms()
local verdict = a.audit_verdict or ''  -- the audit trail's verdict: this call was made already
-- (after the config: the call that fills it, or asks the audit trail, comes again and is
-- counted once)
if verdict == '' then
  local wait = rate_limited(k.rate, a.rate_limit, now)
  if wait then return {'rate_limited', wait} end
end
if cfg == 'not_found' then return {'not_found'} end
-- (one seat on a license of none is a plain refusal, as it always was; the renewal of a
-- live lease of this weight is a renewal, whatever the license's seats became since)
if w > 1 and w > cfg.seats and not holds_weight(k, client, w, now) then
  return {'too_many_seats', cfg.seats}
end
if cfg.suspended == '1' then return {'suspended'} end
local T = nil
local wants, version = a.entitlements or '', a.version or ''
if cfg.terms or wants ~= '' or version ~= '' then
  T = load_terms(k.cfg, cfg.terms)
  if T.starts and now < T.starts then return {'not_started', T.starts} end
  if T.fin and now >= T.fin then return {'license_expired', T.exp, T.fin} end
  if wants ~= '' then
    local missing = nil  -- (a table only for a refusal)
    for name in string.gmatch(wants, '%S+') do
      if not string.find(T.ent, ' ' .. name .. ' ', 1, true) then
        missing = missing or {}
        missing[#missing + 1] = name
      end
    end
    if missing then return {'not_entitled', table.concat(missing, ' ')} end
  end
  -- both as comparable text (seatlease.licenses.version_text): part by part, as numbers
  if version ~= '' and T.maxk and version > T.maxk then
    return {'version_not_entitled', T.maxv}
  end
  if not cfg.terms then T = nil end  -- a license without terms answers as it always did
end
if requested > cfg.max_lease_ms then
  -- (a heartbeat's re-admission asks its token's length: the license's longest, at most)
  if a.readmit_for ~= 'heartbeat' then return {'lease_too_long', cfg.max_lease_ms / 1000} end
  requested = cfg.max_lease_ms
end
if borrow > cfg.max_borrow_ms then return {'borrow_too_long', cfg.max_borrow_ms / 1000} end
local lease_ms = cfg.lease_ms
if requested > 0 then lease_ms = requested end
if borrow > 0 then lease_ms = borrow end
local is_borrow = 0
if borrow > 0 then is_borrow = 1 end
local P = nil
if cfg.policy then
  begin_policy()
  P = cjson.decode(cfg.policy)
  if P.needs_user == 1 and user == '' then return {'user_required'} end
  if user ~= '' and user_facts(k.cfg, user).denied then return {'user_denied'} end
end

local on_heartbeat = a.readmit_for == 'heartbeat'
local mark_ms, lost = shard_mark(k.mark)
local window = recovery_ends(k, cfg, now, failover_began, lost and mark_ms or nil)

-- Whether the token's lease comes back (the header's rules), read before anything is
-- written: the re-admission R, or nil and why not.
local function readmission()
  local exp, iat = tonumber(a.token_exp_ms), tonumber(a.token_iat_ms)
  local r = {sid = a.token_session_id, exp = exp, w = tonumber(a.token_seats),
             borrowed = a.token_borrowed == '1', machine = a.token_machine or ''}
  if exp <= now then return nil, 'expired' end
  local score = tonumber(redis.call('ZSCORE', k.leases, r.sid))
  if score and score > now then return nil, 'live' end
  if score then  -- its record, expired and not yet reclaimed: reclaimed first (r.stale)
    local raw = redis.call('HGET', k.sessions, r.sid)
    local rec = raw and cjson.decode(raw) or {}
    if rec.te and rec.te > now then return nil, 'ended' end  -- shortened, cut: by us
    r.stale = true
  end
  local note = ended_note(k, r.sid, now)
  if note then return nil, note end
  if not window and not r.borrowed then return nil, 'closed' end
  if asked and asked ~= r.w then return nil, 'weight' end
  -- judged as the user its token says the policy judged it as, never as another
  if (a.token_user or '') ~= '' and a.token_user ~= user then return nil, 'user' end
  if mark_ms and mark_ms > iat then  -- this Redis's memory is younger than the token
    if verdict == '' then return 'consult' end
    if verdict ~= 'clear' then return nil, verdict end
  end
  if window then
    r.why = (lost and mark_ms >= (failover_began or 0)) and 'data_lost' or 'failover'
  else
    r.why = 'borrow'
  end
  return r
end
local R, why_not = nil, nil
if (a.token_session_id or '') ~= '' then
  R, why_not = readmission()
  if R == 'consult' then return {'consult_audit', mark_ms} end
  if on_heartbeat and not R then return {'not_readmitted', why_not} end
  if R then w = R.w end
end

-- Prune this license's expired leases first, so the count below is exact even when the
-- reaper is late (bounded per call; ZCOUNT ignores any expired lease left behind).
local pruned = reclaim_expired(k, lk, tenant, license, now, cfg.seats, prefix, 100)

local deadline = now + lease_ms
local cut = false
if T and T.fin and not T.keep and deadline > T.fin then deadline, cut = T.fin, true end
local bound_to = nil  -- the machine a borrowed lease is bound to (its answer says it)
local recovering = nil  -- a grant made in a failover's window: the window's end (ms)
-- the reply, with the license's terms when it has some
local judged_user = nil  -- the lease's user as the policy judged it (its tokens carry it)
local function answer(reply)
  if T then terms_tail(reply, T, now, cut) end
  reply = machine_tail(weighted_tail(reply, w), bound_to)
  reply = user_tail(reply, judged_user)
  if recovering then reply[#reply + 1] = 'r:' .. int_arg(recovering) end
  return remember(reply_key, reply_ttl, now, reply)
end
local held = redis.call('HGET', k.clients, client)
local reweigh = nil  -- the caller's lingering lease, taken back with another weight
if held then
  local score = tonumber(redis.call('ZSCORE', k.leases, held))
  if score and score > now then
    -- (a heartbeat's re-admission: its client holds another lease here, or a lingering
    -- one, which only an acquire takes back)
    if on_heartbeat then return {'not_readmitted', 'superseded'} end
    R = nil  -- the caller's own live lease is renewed: the token has nothing to bring back
    local rec = cjson.decode(redis.call('HGET', k.sessions, held))
    judged_user = rec.u
    if rec.b and machine ~= '' and rec.f and rec.f ~= machine then
      return remember(reply_key, reply_ttl, now, {'machine_mismatch'})
    end
    if asked and asked ~= (rec.w or 1) and not rec.lg then
      return remember(reply_key, reply_ttl, now, {'seats_mismatch', rec.w or 1, asked})
    end
    if asked and asked ~= (rec.w or 1) then
      reweigh = rec  -- decided below as a new lease, its own seats free for it
    else
      w = rec.w or 1
      local used = in_use(k, now)
      if rec.b then
        bound_to = rec.f
        -- a borrow outlives no term: one the operator's cut missed is cut now
        local bound = term_bound(T, now)
        if bound and score > bound[1] then
          local before = score
          score, rec.x = bound[1], bound[2]
          put_lease(k, lk, held, rec, int_arg(score), before)
        end
        cut = rec.x == 1
        return answer({'renewed', held, score, rec.l, used, cfg.seats, cfg.limit, now, 1})
      end
      -- The seat is held either way: these change the lease, never the seat count.
      local etype = nil
      if is_borrow == 1 then
        rec.b, etype = 1, 'lease.converted'
        if machine ~= '' then rec.f = machine end
        bound_to = rec.f
      elseif rec.lg then
        etype = 'lease.renewed'
      end
      if rec.lg then redis.call('ZREM', k.ended, held) end
      local token_deadline = score  -- (a lingering lease's is the linger's: none)
      if rec.lg then token_deadline = nil end
      rec.lg = nil
      rec.l = lease_ms
      rec.x, rec.tm = cut and 1 or nil, T and 1 or nil
      put_lease(k, lk, held, rec, int_arg(deadline), token_deadline)
      if is_borrow == 0 then note_lease_length(k.lmax, lease_ms, now) end
      if etype then
        emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant, license_id = license,
          session_id = held, client_id = client, seats_used = used, seats_total = cfg.seats,
          w = w}, rec.m)
      end
      return answer({'renewed', held, deadline, lease_ms, used, cfg.seats, cfg.limit, now,
        is_borrow})
    end
  else
    reclaim(k, lk, tenant, license, held, now, cfg.seats, prefix)
  end
end

-- A token's lease coming back: its expired record goes first (a weight left behind
-- with it too); a borrow comes back as the borrow it was, until its end.
if R and R.stale then reclaim(k, lk, tenant, license, R.sid, now, cfg.seats, prefix) end
if R and R.borrowed then
  is_borrow, machine, cut = 1, R.machine, false
  deadline = R.exp
  if T and T.fin and not T.keep and deadline > T.fin then deadline, cut = T.fin, true end
  lease_ms = deadline - now
end

-- A failover's recovery window (recovery_ends in _lib.lua): the holders this Redis lost
-- come back with their tokens within one heartbeat interval of the license's longest
-- recent lease; until then no new seat, unless the license chose to grant (then a
-- re-admission is not bound by the cap either).
local granting = false
if window then
  granting = redis.call('HGET', k.cfg, 'fo') == 'grant'
  if not R then
    if not granting then
      -- (not kept for a repeat: it changed nothing and says "later"; a repeat of the
      -- call after Retry-After is decided then, as a rate limit's is)
      redis.call('HINCRBY', k.denials, lk, 1)
      return {'recovering', window - now}
    end
    recovering = window
  end
end
local over_cap = R and (R.borrowed or (R.why ~= 'borrow' and granting))

-- Under the prune limit every expired lease is gone (its weight with it), so ZCARD and
-- the weights' sum are the live count.
local used
if pruned < 100 then
  local leases = redis.call('ZCARD', k.leases)
  local extra = tonumber(redis.call('GET', k.wsum) or 0)
  -- (no lease left, no weight: a sum a call of the release before left behind goes)
  if leases == 0 and extra ~= 0 then redis.call('DEL', k.wsum) extra = 0 end
  used = leases + redis.call('ZCARD', k.units) + extra
else
  used = in_use(k, now)
end
-- a lingering lease taken back with another weight: its seats are free for its client
local own = reweigh and (reweigh.w or 1) or 0
local grant = nil
if P then
  local S = seat_state(P, k, now, cfg.limit, used - own)
  S.used0 = used
  if reweigh then set_aside(S, reweigh, user) end
  local refusal
  local call = {client = client, user = user, queue = a.queue == '1' and not on_heartbeat,
    ticket = a.ticket or '', new_ticket = a.new_ticket, meta = meta, tenant = tenant,
    license = license, prefix = prefix, seats = cfg.seats, w = w}
  if over_cap then
    grant, refusal = policy_admit(S, call)
  else
    grant, refusal = policy_decide(S, call)
  end
  if refusal and on_heartbeat then return {'not_readmitted', refusal[1]} end
  if refusal then
    if refusal[1] ~= 'queued' then redis.call('HINCRBY', k.denials, lk, 1) end
    if refusal[1] == 'denied' or refusal[1] == 'queued' or refusal[1] == 'queue_full' then
      note_refusal(k, lk, client, shown_user, w, now, refusal[1] == 'queued')
    end
    return remember(reply_key, reply_ttl, now, refusal)
  end
  grant.S = S
elseif used - own + w > cfg.limit and not over_cap then
  if on_heartbeat then return {'not_readmitted', 'denied'} end
  -- Denials are counters (one field per license), not events: a retry storm cannot grow
  -- Redis. The reaper turns them into lease.denied events.
  redis.call('HINCRBY', k.denials, lk, 1)
  note_refusal(k, lk, client, shown_user, w, now, false)
  local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
    'WITHSCORES', 'LIMIT', '0', '1')
  local retry_ms = 1000
  if #first > 0 then retry_ms = tonumber(first[2]) - now end
  return remember(reply_key, reply_ttl, now, {'denied', used, cfg.seats, cfg.limit, retry_ms})
end

local sid = new_sid
local rec = {c = client, a = now, l = lease_ms, m = meta, t = cfg.seats}
local etype = 'lease.acquired'
if R then
  sid, etype, rec.m = R.sid, 'lease.recovered', with_field(meta, '"recovered":true')
  -- its token may say more than the lease re-created (a shorter call, the license's
  -- maximum lowered, the term's cut): its end is noted until then all the same
  if R.exp > deadline then rec.te = R.exp end
end
local deadline_text = int_arg(deadline)
if reweigh then
  -- the lingering lease, taken back with its new weight: same session, new counts
  sid, rec, etype = held, reweigh, 'lease.renewed'
  redis.call('ZREM', k.ended, sid)
  uncount(k.users, rec)
  drop_weight(k, sid, rec)
  rec.w, rec.ws, rec.lg, rec.cu, rec.cg, rec.u, rec.g = nil, nil, nil, nil, nil, nil, nil
  rec.l, rec.x, rec.tm = lease_ms, nil, nil
end
if w > 1 then rec.w = w end
if is_borrow == 1 then
  -- (the lingering lease taken back as a borrow: converted, as with its own weight)
  rec.b = 1
  if not R then etype = reweigh and 'lease.converted' or 'lease.borrowed' end
  if machine ~= '' then rec.f = machine end
  bound_to = rec.f
end
-- x: cut to the license's end; tm: the license had terms (heartbeat reads them)
if cut then rec.x = 1 end
if T then rec.tm = 1 end
if grant then
  -- u: the user; g: the group whose reservation the seat is charged to
  if user ~= '' then rec.u, judged_user = user, user end
  if grant.g then rec.g = grant.g end
  record_lease(grant.S, user, grant.g, rec, w, grant.c)
  if grant.ticket then
    drop_ticket(k, client)
    grant.ticket.w = w > 1 and w or nil
    queue_event(k, {prefix = prefix, tenant = tenant, license = license, seats = cfg.seats},
      'queue.granted', client, grant.ticket, now, nil, sid, used - own + w)
  end
end
add_weight(k, rec, w)
note_grant(k, client, now)
if is_borrow == 0 then note_lease_length(k.lmax, lease_ms, now) end
put_lease(k, lk, sid, rec, deadline_text)
redis.call('HSET', k.clients, client, sid)
-- (a grant in a failover's window: the event says so, after the client's metadata)
local event_meta = rec.m
if recovering then event_meta = with_field(rec.m, '"recovering":true') end
if R then
  event_meta = with_reason(meta, R.why)
  redis.call('INCR', k.recovered)
end
emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant, license_id = license,
  session_id = sid, client_id = client, seats_used = used - own + w, seats_total = cfg.seats,
  w = w}, event_meta)
local status = 'acquired'
if R then status = 'recovered' elseif reweigh then status = 'renewed' end
return answer({status, sid, deadline, lease_ms, used - own + w, cfg.seats, cfg.limit, now,
  is_borrow})
