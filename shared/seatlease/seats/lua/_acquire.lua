-- _acquire.lua: acquire.lua's steps, in the order acquire.lua runs them (its header says
-- the rules). scripts.py puts this file between the helpers and acquire.lua: as the seat
-- library's function the steps are defined once, at FUNCTION LOAD, not on every call.
--
-- A step takes the call's state C (acquire_state), and the call's named keys and
-- arguments k and a (as parameters: no closure per call), and returns nil to go on, or the
-- call's answer (remembered for a repeat where the rules say so): acquire.lua returns the
-- first answer a step gives.

-- The call's state: what the steps find out on the way, and the arguments they parse
-- (here, before anything is written: the lengths and seats asked) or change (the
-- lease's weight, the machine); the rest they read from `k` and `a` themselves (the
-- license's key prefix from k.lk). The constructor names the fields every grant sets;
-- the others (T, P, R, held, reweigh, grant, bound_to, judged_user, recovering, share,
-- shared_n: nil until found) are set only on a license with terms, a policy or sharing,
-- a token or a lease held. Both together are under 32: the one hash part the constructor sizes never grows.
local function acquire_state(k, a)
  k.lk = a.tenant_id .. '/' .. a.license_id
  local asked = tonumber(a.seats or '')  -- nil: not said
  return {
    reply_key = reply_slot(k.reply0, k.reply1, a.reply_field), user = a.user or '',
    requested = tonumber(a.lease_seconds) * 1000,
    borrow = tonumber(a.borrow_seconds or 0) * 1000,
    asked = asked, w = asked or 1, machine = a.fingerprint or '',
    on_heartbeat = a.readmit_for == 'heartbeat',
    -- found on the way (false: not yet)
    cfg = false, now = false, lease_ms = false, is_borrow = 0, window = false,
    pruned = false, deadline = false, cut = false, over_cap = false, used = false, own = 0,
  }
end

-- The answer of a grant or a renewal, with its tails (the license's terms, the weight,
-- the machine, the user, a failover's window), remembered for a repeat.
local function answer(C, a, reply)
  if C.T then terms_tail(reply, C.T, C.now, C.cut) end
  reply = machine_tail(weighted_tail(reply, C.w), C.bound_to or nil)
  reply = user_tail(reply, C.judged_user or nil)
  if C.recovering then reply[#reply + 1] = 'r:' .. int_arg(C.recovering) end
  if C.shared_n then reply[#reply + 1] = 's:' .. int_arg(C.shared_n) end
  return remember(C.reply_key, a.reply_ttl_ms, C.now, reply)
end

-- The license's configuration, the tenant's rate budget, the license's existence, the
-- seats asked against the license's, suspension.
local function configuration(C, k, a)
  local cfg = load_config(k.cfg)
  if cfg == nil then return {'missing'} end
  C.cfg = cfg
  -- The call's one server time: the rate budget, the leases and the stored reply use it.
  local now = now_ms()
  C.now = now
  -- the audit trail's verdict: this call was made already (after the config: the call
  -- that fills it, or asks the audit trail, comes again and is counted once)
  if (a.audit_verdict or '') == '' then
    local wait = rate_limited(k.rate, a.rate_limit, now)
    if wait then return {'rate_limited', wait} end
  end
  if cfg == 'not_found' then return {'not_found'} end
  -- (one seat on a license of none is a plain refusal, as it always was; the renewal of a
  -- live lease of this weight is a renewal, whatever the license's seats became since)
  if C.w > 1 and C.w > cfg.seats and not holds_weight(k, a.client_id, C.w, now) then
    return {'too_many_seats', cfg.seats}
  end
  if cfg.suspended == '1' then return {'suspended'} end
end

-- The license's term, entitlements and version.
local function terms(C, k, a)
  local cfg, now = C.cfg, C.now
  local wants, version = a.entitlements or '', a.version or ''
  if not (cfg.terms or wants ~= '' or version ~= '') then return end
  local T = load_terms(k.cfg, cfg.terms)
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
  if cfg.terms then C.T = T end  -- a license without terms answers as it always did
end

-- The lease's length (a borrow's, or the lease asked for, within the license's maximums)
-- and the policy's rules on the user.
local function limits(C, k, a)
  local cfg, user = C.cfg, C.user
  local requested, borrow = C.requested, C.borrow
  if requested > cfg.max_lease_ms then
    -- (a heartbeat's re-admission asks its token's length: the license's longest, at most)
    if not C.on_heartbeat then return {'lease_too_long', cfg.max_lease_ms / 1000} end
    requested = cfg.max_lease_ms
  end
  if borrow > cfg.max_borrow_ms then
    return {'borrow_too_long', cfg.max_borrow_ms / 1000}
  end
  local lease_ms = cfg.lease_ms
  if requested > 0 then lease_ms = requested end
  if borrow > 0 then lease_ms, C.is_borrow = borrow, 1 end
  C.lease_ms = lease_ms
  if cfg.policy then
    begin_policy()
    local P = cjson.decode(cfg.policy)
    C.P = P
    if P.needs_user == 1 and user == '' then return {'user_required'} end
    if user ~= '' and user_facts(k.cfg, user).denied then return {'user_denied'} end
  end
end

-- Whether the token's lease comes back (the header's rules), read before anything is
-- written: the re-admission R, or nil and why not ('consult': ask the audit trail).
-- `mark_ms` and `lost`: the shard's mark (shard_mark); `began`: the failover's start.
local function readmission(C, k, a, mark_ms, lost, began)
  local now, window, verdict = C.now, C.window, a.audit_verdict or ''
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
  if C.asked and C.asked ~= r.w then return nil, 'weight' end
  -- judged as the user its token says the policy judged it as, never as another
  if (a.token_user or '') ~= '' and a.token_user ~= C.user then return nil, 'user' end
  if mark_ms and mark_ms > iat then  -- this Redis's memory is younger than the token
    if verdict == '' then return 'consult' end
    if verdict ~= 'clear' then return nil, verdict end
  end
  if window then
    r.why = (lost and mark_ms >= (began or 0)) and 'data_lost' or 'failover'
  else
    r.why = 'borrow'
  end
  return r
end

-- A failover's recovery window, and a lease token's lease to bring back (re-admission).
local function token(C, k, a)
  local mark_ms, lost = shard_mark(k.mark)
  local began = tonumber(a.failover_began_ms or '')
  C.window = recovery_ends(k, C.cfg, C.now, began, lost and mark_ms or nil) or false
  if (a.token_session_id or '') == '' then return end
  local R, why_not = readmission(C, k, a, mark_ms, lost, began)
  if R == 'consult' then return {'consult_audit', mark_ms} end
  if C.on_heartbeat and not R then return {'not_readmitted', why_not} end
  if R then C.R, C.w = R, R.w end
end

-- The caller's own lease (the header's table): renewed, converted to a borrow or taken
-- back, and answered; or a lingering one to take back with another weight (C.reweigh,
-- decided below as a new lease); or an expired one, reclaimed. Expired leases of the
-- license are pruned first, so the count after is exact even when the reaper is late
-- (bounded per call; ZCOUNT ignores any expired lease left behind).
local function own_lease(C, k, a)
  local lk, now, cfg, client = k.lk, C.now, C.cfg, a.client_id
  local tenant, license, prefix = a.tenant_id, a.license_id, a.event_prefix
  C.pruned = reclaim_expired(k, lk, tenant, license, now, cfg.seats, prefix, 100)
  local T = C.T
  local deadline = now + C.lease_ms
  if T and T.fin and not T.keep and deadline > T.fin then deadline, C.cut = T.fin, true end
  C.deadline = deadline
  local held = redis.call('HGET', k.clients, client)
  if not held then return end
  C.held = held
  local score = tonumber(redis.call('ZSCORE', k.leases, held))
  if not (score and score > now) then
    reclaim(k, lk, tenant, license, held, now, cfg.seats, prefix)
    return
  end
  -- (a heartbeat's re-admission: its client holds another lease here, or a lingering
  -- one, which only an acquire takes back)
  if C.on_heartbeat then return {'not_readmitted', 'superseded'} end
  C.R = false  -- the caller's own live lease is renewed: the token has nothing to bring back
  local rec = cjson.decode(redis.call('HGET', k.sessions, held))
  C.judged_user = rec.u or false
  local asked, machine = C.asked, C.machine
  if rec.b and machine ~= '' and rec.f and rec.f ~= machine then
    return remember(C.reply_key, a.reply_ttl_ms, now, {'machine_mismatch'})
  end
  if asked and asked ~= (rec.w or 1) and not rec.lg then
    return remember(C.reply_key, a.reply_ttl_ms, now, {'seats_mismatch', rec.w or 1, asked})
  end
  if asked and asked ~= (rec.w or 1) then
    C.reweigh = rec  -- decided below as a new lease, its own seats free for it
    return
  end
  C.w = rec.w or 1
  if rec.sh then C.shared_n = share_group(k.users, rec.sh) end
  local used = in_use(k, now)
  if rec.b then
    C.bound_to = rec.f or false
    -- a borrow outlives no term: one the operator's cut missed is cut now
    local bound = term_bound(T or nil, now)
    if bound and score > bound[1] then
      local before = score
      score, rec.x = bound[1], bound[2]
      put_lease(k, lk, held, rec, int_arg(score), before)
    end
    C.cut = rec.x == 1
    return answer(C, a, {'renewed', held, score, rec.l, used, cfg.seats, cfg.limit, now, 1})
  end
  -- The seat is held either way: these change the lease, never the seat count.
  local etype = nil
  if C.is_borrow == 1 then
    rec.b, etype = 1, 'lease.converted'
    if machine ~= '' then rec.f = machine end
    C.bound_to = rec.f or false
    if rec.iw then  -- a borrow is never idle: its warning goes
      rec.iw = nil
      redis.call('ZREM', k.idlers, held)
    end
  elseif rec.lg then
    etype = 'lease.renewed'
  end
  if rec.lg then redis.call('ZREM', k.ended, held) end
  local token_deadline = score  -- (a lingering lease's is the linger's: none)
  if rec.lg then token_deadline = nil end
  rec.lg = nil
  rec.l = C.lease_ms
  rec.x, rec.tm = C.cut and 1 or nil, T and 1 or nil
  -- (a warned lease's re-acquire is no activity: under 'always' its deadline stays cut to
  -- its reclaim time, _idle.lua)
  if rec.iw and C.is_borrow == 0 then
    local _, always = idle_rule(cfg.idle)
    if always and rec.iw < deadline then deadline, rec.x, C.cut = rec.iw, 3, false end
  end
  put_lease(k, lk, held, rec, int_arg(deadline), token_deadline)
  if C.is_borrow == 0 then note_lease_length(k.lmax, C.lease_ms, now) end
  if etype then
    emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant,
      license_id = license, session_id = held, client_id = client, seats_used = used,
      seats_total = cfg.seats, w = C.w}, rec.m)
  end
  return answer(C, a, {'renewed', held, deadline, C.lease_ms, used, cfg.seats, cfg.limit,
    now, C.is_borrow})
end

-- A failover's recovery window (recovery_ends in _lib.lua): the holders this Redis lost
-- come back with their tokens within one heartbeat interval of the license's longest
-- recent lease; until then no new seat, unless the license chose to grant (then a
-- re-admission is not bound by the cap either). A token's lease coming back: its expired
-- record goes first (a weight left behind with it too); a borrow comes back as the
-- borrow it was, until its end.
local function failover_window(C, k, a)
  local now, R, T = C.now, C.R, C.T
  if R and R.stale then
    reclaim(k, k.lk, a.tenant_id, a.license_id, R.sid, now, C.cfg.seats, a.event_prefix)
  end
  if R and R.borrowed then
    C.is_borrow, C.machine, C.cut = 1, R.machine, false
    local deadline = R.exp
    if T and T.fin and not T.keep and deadline > T.fin then deadline, C.cut = T.fin, true end
    C.deadline, C.lease_ms = deadline, deadline - now
  end
  local window, granting = C.window, false
  if window then
    granting = redis.call('HGET', k.cfg, 'fo') == 'grant'
    if not R then
      if not granting then
        -- (not kept for a repeat: it changed nothing and says "later"; a repeat of the
        -- call after Retry-After is decided then, as a rate limit's is)
        redis.call('HINCRBY', k.denials, k.lk, 1)
        return {'recovering', window - now}
      end
      C.recovering = window
    end
  end
  C.over_cap = R and (R.borrowed or (R.why ~= 'borrow' and granting)) or false
end

-- The seats in use. Under the prune limit every expired lease is gone (its weight with
-- it, its share group's count too), so ZCARD, the weights' sum and the shared leases
-- beyond their groups' seats make the live count. A lingering lease taken back
-- with another weight: its seats are free for its client (C.own).
local function count(C, k)
  if C.pruned < 100 then
    local leases = redis.call('ZCARD', k.leases)
    local extra = tonumber(redis.call('GET', k.wsum) or 0)
    -- (no lease left, no weight: a sum a call of the release before left behind goes)
    if leases == 0 and extra ~= 0 then
      redis.call('DEL', k.wsum)
      extra = 0
    end
    C.used = leases + redis.call('ZCARD', k.units) + extra - shared_extra(k)
  else
    C.used = in_use(k, C.now)
  end
  C.own = C.reweigh and (C.reweigh.w or 1) or 0
  if C.reweigh and C.reweigh.sh then
    -- (a shared one frees only the seat its group no longer needs without it)
    local n, seats = share_group(k.users, C.reweigh.sh)
    C.own = math.max(0, seats - (n - 1))
  end
end

-- The call's share group on a license that shares (_lib.lua's shared seats): the user,
-- the host or both (a.share_user, a.share_host: as the request or its metadata names
-- them; '' for none). A lease of one seat that is not a borrow (nor a lingering lease
-- taken back with another weight) and names them is in the group; it *joins* one of the
-- group's seats when the group has room on them (no limit, or fewer sessions than seats x
-- limit): then no seat is taken and nothing more is decided (the deny list, suspension,
-- the term and the rate budget were judged already). Else it takes a seat as any lease
-- does, and the group grows by that seat. (Under the prune limit every expired lease is
-- gone, so a group with seats has a live or lingering session on them.)
local function sharing(C, k, a)
  local rule = C.cfg.share
  if not rule or C.w ~= 1 or C.is_borrow == 1 or C.reweigh then return end
  local mode, limit = string.match(rule, '^(%a+)|(%d+)$')
  local user, host, key = a.share_user or '', a.share_host or '', nil
  if mode == 'u' then
    if user ~= '' then key = 'u|' .. user end
  elseif mode == 'h' then
    if host ~= '' then key = 'h|' .. host end
  elseif mode == 'uh' and user ~= '' and host ~= '' then
    key = 'uh|' .. #user .. '|' .. user .. host  -- (the user's length: no two pairs alike)
  end
  if not key then return end
  limit = tonumber(limit) or 0
  local n, seats = share_group(k.users, key)
  C.share = {key = key, by = mode}
  if seats > 0 and C.pruned < 100 and (limit == 0 or n < seats * limit) then
    C.share.joins = true
  end
end

-- Idle reclaim when needed (_idle.lua): a call that finds no seat free first reclaims the
-- license's warned idle leases whose time has come (earliest first, among at most
-- IDLE_WALK of them; a borrowed or lingering one never), when together they free the
-- seats it lacks, and only those: a member of a share group whose other sessions keep its
-- seat frees none and is left alone, and a call they cannot make room for (too few, or a
-- user at the policy's per-user limit) reclaims nothing, unless the walk stopped at its
-- bound (more are due behind: a caller needing more seats than one walk frees gathers
-- them over its calls, as it retries). Each is lease.reclaimed, reason
-- idle, and its client's next heartbeat learns why. The seats go to this call, or, under
-- a policy, as the policy gives them (the queue's head first, a reservation's group).
local IDLE_WALK = 20
local function make_room(C, k, a)
  local timeout, always = idle_rule(C.cfg.idle)
  if not timeout or always or C.over_cap then return end
  local need = C.used - C.own + C.w - C.cfg.limit
  if need <= 0 then return end
  local P = C.P
  if P and P.mpu > 0 and C.user ~= '' and count_of(k, 'u', C.user) + C.w > P.mpu then
    return
  end
  local now = C.now
  local due = redis.call('ZRANGEBYSCORE', k.idlers, '-inf', int_arg(now), 'LIMIT', '0',
    int_arg(IDLE_WALK))
  local take, freed = {}, 0
  for _, sid in ipairs(due) do
    local score = tonumber(redis.call('ZSCORE', k.leases, sid))
    local raw = redis.call('HGET', k.sessions, sid)
    local rec = raw and cjson.decode(raw)
    if score and score > now and rec and rec.iw and rec.iw <= now and not rec.b
      and not rec.lg then
      local frees = rec.w or 1
      if rec.sh then
        local n, seats = share_group(k.users, rec.sh)
        frees = math.max(0, seats - (n - 1))
      end
      if frees > 0 then
        take[#take + 1] = {sid, rec, score}
        freed = freed + frees
        if freed >= need then break end
      end
    elseif not (score and score > now and rec and rec.iw) then
      redis.call('ZREM', k.idlers, sid)  -- (ended, or no longer warned: left behind)
    end
  end
  -- (too few to make room, unless the walk stopped at its bound: more are due behind
  -- them, and a caller that needs more than a walk finds gathers them over its calls)
  if freed < need and #due < IDLE_WALK then return end
  for _, t in ipairs(take) do
    local sid, rec = t[1], t[2]
    rec.x = 3
    drop_lease(k, k.lk, sid, rec, now, t[3], 'idle')
  end
  count(C, k)
  for _, t in ipairs(take) do
    emit_end(k, a.tenant_id, a.license_id, t[1], t[2], now, C.cfg.seats, a.event_prefix,
      C.used)
  end
end

-- A refusal for want of seats comes back no later than the first warned idle lease's
-- reclaim (when_needed: that call may take its seat).
local function idle_retry(C, k, refusal)
  if not (C.cfg.idle and k.idlers) then return refusal end
  local first = redis.call('ZRANGE', k.idlers, '0', '0', 'WITHSCORES')
  if #first == 0 then return refusal end
  refusal[5] = math.max(1, math.min(refusal[5], tonumber(first[2]) - C.now))
  return refusal
end

-- The verdict: the license's policy (its queue, reservations and per-user limit), or
-- the cap alone. A refusal for want of seats is noted for the refusal events.
local function decide(C, k, a)
  sharing(C, k, a)
  if C.share and C.share.joins then return end
  make_room(C, k, a)
  local lk, now, cfg, used, own, w = k.lk, C.now, C.cfg, C.used, C.own, C.w
  if C.P then
    local S = seat_state(C.P, k, now, cfg.limit, used - own)
    S.used0 = used
    if C.reweigh then set_aside(S, C.reweigh, C.user) end
    local call = {client = a.client_id, user = C.user,
      queue = a.queue == '1' and not C.on_heartbeat, ticket = a.ticket or '',
      new_ticket = a.new_ticket, meta = a.metadata, tenant = a.tenant_id,
      license = a.license_id, prefix = a.event_prefix, seats = cfg.seats, w = w}
    local grant, refusal
    if C.over_cap then
      grant, refusal = policy_admit(S, call)
    else
      grant, refusal = policy_decide(S, call)
    end
    if refusal and C.on_heartbeat then return {'not_readmitted', refusal[1]} end
    if refusal then
      if refusal[1] ~= 'queued' then redis.call('HINCRBY', k.denials, lk, 1) end
      if refusal[1] == 'denied' or refusal[1] == 'queued' or refusal[1] == 'queue_full' then
        note_refusal(k, lk, a.client_id, a.shown_user or '', w, now, refusal[1] == 'queued')
      end
      if refusal[1] == 'denied' then refusal = idle_retry(C, k, refusal) end
      return remember(C.reply_key, a.reply_ttl_ms, now, refusal)
    end
    grant.S = S
    C.grant = grant
  elseif used - own + w > cfg.limit and not C.over_cap then
    if C.on_heartbeat then return {'not_readmitted', 'denied'} end
    -- Denials are counters (one field per license), not events: a retry storm cannot
    -- grow Redis. The reaper turns them into lease.denied events.
    redis.call('HINCRBY', k.denials, lk, 1)
    note_refusal(k, lk, a.client_id, a.shown_user or '', w, now, false)
    local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
      'WITHSCORES', 'LIMIT', '0', '1')
    local retry_ms = 1000
    if #first > 0 then retry_ms = tonumber(first[2]) - now end
    return remember(C.reply_key, a.reply_ttl_ms, now,
      idle_retry(C, k, {'denied', used, cfg.seats, cfg.limit, retry_ms}))
  end
end

-- The share rule's modes as the events name them.
local SHARE_BY = {u = 'user', h = 'host', uh = 'user_host'}

-- The lease granted: a new one, a token's lease re-created with its session id, or the
-- lingering lease taken back with its new weight; stored, counted and told (its event).
-- Returns the answer's status.
local function grant(C, k, a)
  local lk, now, cfg, R, w, reweigh = k.lk, C.now, C.cfg, C.R, C.w, C.reweigh
  local client, meta, grant_, deadline = a.client_id, a.metadata, C.grant, C.deadline
  local tenant, license, prefix = a.tenant_id, a.license_id, a.event_prefix
  local sid = a.new_session_id
  local rec = {c = client, a = now, l = C.lease_ms, m = meta, t = cfg.seats}
  local etype = 'lease.acquired'
  if R then
    sid, etype, rec.m = R.sid, 'lease.recovered', with_field(meta, '"recovered":true')
    -- its token may say more than the lease re-created (a shorter call, the license's
    -- maximum lowered, the term's cut): its end is noted until then all the same
    if R.exp > deadline then rec.te = R.exp end
  end
  if reweigh then
    -- the lingering lease, taken back with its new weight: same session, new counts
    sid, rec, etype = C.held, reweigh, 'lease.renewed'
    redis.call('ZREM', k.ended, sid)
    leave_counts(k.users, rec)  -- (and its share group: a lease of more seats shares none)
    rec.sh = nil
    drop_weight(k, sid, rec)
    rec.w, rec.ws, rec.lg, rec.cu, rec.cg, rec.u, rec.g = nil, nil, nil, nil, nil, nil, nil
    rec.l, rec.x, rec.tm = C.lease_ms, nil, nil
  end
  if w > 1 then rec.w = w end
  if C.is_borrow == 1 then
    -- (the lingering lease taken back as a borrow: converted, as with its own weight)
    rec.b = 1
    if not R then etype = reweigh and 'lease.converted' or 'lease.borrowed' end
    if C.machine ~= '' then rec.f = C.machine end
    C.bound_to = rec.f or false
  end
  -- x: cut to the license's end; tm: the license had terms (heartbeat reads them)
  if C.cut then rec.x = 1 end
  if C.T then rec.tm = 1 end
  local seats_used = C.used - C.own + w
  if grant_ then
    -- u: the user; g: the group whose reservation the seat is charged to
    if C.user ~= '' then rec.u, C.judged_user = C.user, C.user end
    if grant_.g then rec.g = grant_.g end
    record_lease(grant_.S, C.user, grant_.g, rec, w, grant_.c)
    if grant_.ticket then
      drop_ticket(k, client)
      grant_.ticket.w = w > 1 and w or nil
      queue_event(k, {prefix = prefix, tenant = tenant, license = license,
        seats = cfg.seats}, 'queue.granted', client, grant_.ticket, now, nil, sid, seats_used)
    end
  end
  add_weight(k, rec, w)
  local event_extra = nil
  if C.share then
    local joins = C.share.joins or false
    rec.sh = C.share.key
    -- the user its group is of: its answer and tokens carry it ('u:'), so a re-admission
    -- by the token is the same user's and finds the group again
    if C.share.by ~= 'h' and not rec.u then rec.u, C.judged_user = a.share_user, a.share_user end
    C.shared_n = join_share(k.users, rec.sh, not joins)
    if joins then seats_used = seats_used - w end
    -- (flat, as every metadata value is: the audit trail stores it as it is)
    event_extra = '"shared_by":"' .. (SHARE_BY[C.share.by] or C.share.by)
      .. '","shared_sessions":' .. int_arg(C.shared_n)
  end
  note_grant(k, client, now)
  if C.is_borrow == 0 then note_lease_length(k.lmax, C.lease_ms, now) end
  put_lease(k, lk, sid, rec, int_arg(deadline))
  redis.call('HSET', k.clients, client, sid)
  -- (a grant in a failover's window: the event says so, after the client's metadata)
  local event_meta = rec.m
  if C.recovering then event_meta = with_field(rec.m, '"recovering":true') end
  if R then
    event_meta = with_reason(meta, R.why)
    redis.call('INCR', k.recovered)
  end
  if event_extra then event_meta = with_field(event_meta, event_extra) end
  emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant, license_id = license,
    session_id = sid, client_id = client, seats_used = seats_used, seats_total = cfg.seats,
    w = w}, event_meta)
  local status = 'acquired'
  if R then status = 'recovered' elseif reweigh then status = 'renewed' end
  return {status, sid, deadline, C.lease_ms, seats_used, cfg.seats, cfg.limit, now,
    C.is_borrow}
end
