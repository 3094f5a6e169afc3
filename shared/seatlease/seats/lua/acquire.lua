-- acquire.lua: take a seat on a license, or extend (or take back) the caller's lease.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] clients
-- KEYS[5] deadlines (shard)      KEYS[6] outbox (shard)   KEYS[7] denials (shard)
-- KEYS[8], KEYS[10] the license's reply hashes (generations 0 and 1)   ARGV[11] this
--   call's field in them (idempotency, see replay in _lib.lua)
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] client_id
-- ARGV[4] session id to use for a new lease (random, from Python)
-- ARGV[5] requested lease in seconds, 0 for the license's default
-- ARGV[6] metadata as JSON text   ARGV[7] event id prefix   ARGV[8] reply TTL in ms
-- ARGV[9] borrow in seconds, 0 for a lease that heartbeats (Python never sends both)
-- KEYS[9] the tenant's rate budget in this shard   ARGV[10] its calls per second, 0: none
-- KEYS[11] users   KEYS[12] queue   KEYS[13] tickets   KEYS[14] ticket deadlines (the
-- policy's and the queue's state, read only on a license with a policy: _policy.lua)
-- ARGV[12] user ('' for none)   ARGV[13] 1 to wait in the queue   ARGV[14] the ticket
-- the caller holds ('' for none)   ARGV[15] ticket for a new place in line (random)
-- ARGV[16] the entitlements the product needs, space separated ('' for none)
-- ARGV[17] the product's version as comparable text (version_text; '' for none)
-- KEYS[15] the shard's ticket deadline index (the reaper's, _policy.lua)
-- KEYS[16] units (the release before's weighted leases, _lib.lua's drop_units)
-- KEYS[17] wsum (the weighted leases' extra seats, _lib.lua's add_weight)
-- ARGV[18] the seats the lease counts as ('' for not said: 1 for a new lease, a held
--   lease's own weight for a renewal)
-- ARGV[19] the machine's fingerprint ('' for none): a borrowed lease keeps the machine it
--   was borrowed for (rec.f)
-- ARGV[20] when a failover's recovery began (ms, `seatlease failover begin`; '' for none):
--   until one heartbeat interval of the license's longest lease (+ 5 s) has passed, a new
--   grant waits ({'recovering', retry_ms}) unless the license chose availability (cfg
--   'fo' = 'grant': then granted, its reply and event saying so); renewals go on
-- KEYS[18] refused   KEYS[19] refusing (the license's refused clients, _refusals.lua)
-- KEYS[20] the shard's refused-due index   ARGV[21] the user as shown ('' for none)
-- KEYS[21] ended (release.lua): a lingering lease taken back is no longer ended
--   A refusal for want of seats ('denied', 'queue_full', and 'queued': waiting) is noted
--   per client and minute; a new grant marks the client's noted refusals served.
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
--                       asked from another machine (ARGV[19] not rec.f): machine_mismatch
--   lingering (lg)      taken back: lg cleared, deadline = now + lease (lease.renewed)
--   either, with ARGV[9] > 0 and not borrowed: becomes borrowed, deadline = now + borrow
--                       (lease.converted), bound to ARGV[19]'s machine
--   live otherwise      extended by the lease (no event)
--
-- Returns (a repeat of the call: what its first run returned) one of
--   {'missing'}                 config not cached: fill KEYS[1] and call again
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
--   {'recovering', retry_ms}    a failover's recovery window: no new grant yet
--   {'not_started', starts_ms} | {'license_expired', expires_ms, end_ms}
--   {'not_entitled', 'name name'} (the missing ones) | {'version_not_entitled', max_version}
--   {'acquired' | 'renewed', session_id, deadline_ms, lease_ms, used, seats, limit, now_ms,
--    borrowed (0 or 1)}         lease_ms of a borrowed lease is the borrow's length
--    + for a license with terms: expires_ms, end_ms, flags, entitlements, max_version
--      (terms_tail in _lib.lua)
--    + for a lease of weight w > 1: w (weighted_tail in _lib.lua)
--    + for a borrowed lease bound to a machine: 'm:<fingerprint>' (machine_tail)
--    + for a grant in a failover's recovery window: 'r:<window end ms>' (recovering_tail)
local k = {cfg = KEYS[1], leases = KEYS[2], sessions = KEYS[3], clients = KEYS[4],
           deadlines = KEYS[5], outbox = KEYS[6], denials = KEYS[7], users = KEYS[11],
           queue = KEYS[12], tickets = KEYS[13], tdl = KEYS[14], tix = KEYS[15],
           units = KEYS[16], wsum = KEYS[17], refused = KEYS[18], refusing = KEYS[19],
           refused_due = KEYS[20], ended = KEYS[21]}
local tenant, license, client = ARGV[1], ARGV[2], ARGV[3]
local new_sid, requested, meta, prefix = ARGV[4], tonumber(ARGV[5]) * 1000, ARGV[6], ARGV[7]
local reply_key, reply_ttl = reply_slot(KEYS[8], KEYS[10], ARGV[11]), ARGV[8]
local borrow = tonumber(ARGV[9] or 0) * 1000
local lk = tenant .. '/' .. license
k.lk = lk
local user = ARGV[12] or ''
local asked = tonumber(ARGV[18] or '')  -- nil: not said
local w = asked or 1
local machine = ARGV[19] or ''
local failover_began = tonumber(ARGV[20] or '')
local shown_user = ARGV[21] or ''

local done = replay(reply_key)
if done then return done end


local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
-- The call's one server time: the rate budget, the leases and the stored reply use it.
local now = now_ms()
-- (after the config: the call that fills it comes again and is counted once)
local wait = rate_limited(KEYS[9], ARGV[10], now)
if wait then return {'rate_limited', wait} end
if cfg == 'not_found' then return {'not_found'} end
-- (one seat on a license of none is a plain refusal, as it always was; the renewal of a
-- live lease of this weight is a renewal, whatever the license's seats became since)
if w > 1 and w > cfg.seats and not holds_weight(k, client, w, now) then
  return {'too_many_seats', cfg.seats}
end
if cfg.suspended == '1' then return {'suspended'} end
local T = nil
local wants, version = ARGV[16] or '', ARGV[17] or ''
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
if requested > cfg.max_lease_ms then return {'lease_too_long', cfg.max_lease_ms / 1000} end
if borrow > cfg.max_borrow_ms then return {'borrow_too_long', cfg.max_borrow_ms / 1000} end
local lease_ms = cfg.lease_ms
if requested > 0 then lease_ms = requested end
if borrow > 0 then lease_ms = borrow end
local is_borrow = 0
if borrow > 0 then is_borrow = 1 end
local P = nil
if cfg.policy then
  define_policy()
  P = cjson.decode(cfg.policy)
  if P.needs_user == 1 and user == '' then return {'user_required'} end
  if user ~= '' and user_facts(k.cfg, user).denied then return {'user_denied'} end
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
local function answer(reply)
  if T then terms_tail(reply, T, now, cut) end
  reply = machine_tail(weighted_tail(reply, w), bound_to)
  if recovering then reply[#reply + 1] = 'r:' .. int_arg(recovering) end
  return remember(reply_key, reply_ttl, now, reply)
end
local held = redis.call('HGET', k.clients, client)
local reweigh = nil  -- the caller's lingering lease, taken back with another weight
if held then
  local score = tonumber(redis.call('ZSCORE', k.leases, held))
  if score and score > now then
    local rec = cjson.decode(redis.call('HGET', k.sessions, held))
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
          score, rec.x = bound[1], bound[2]
          move_deadline(k, lk, held, rec, int_arg(score))
          redis.call('HSET', k.sessions, held, cjson.encode(rec))
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
      rec.lg = nil
      rec.l = lease_ms
      rec.x, rec.tm = cut and 1 or nil, T and 1 or nil
      move_deadline(k, lk, held, rec, int_arg(deadline))
      redis.call('HSET', k.sessions, held, cjson.encode(rec))
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

-- A failover's recovery window (seatlease/seats/failover.py): the holders this Redis lost
-- come back with their tokens (readmit.lua) within one heartbeat interval of the
-- license's longest lease; until then no new seat, unless the license chose to grant.
if failover_began then
  local window_end = failover_began + math.floor(cfg.max_lease_ms / 3) + 5000
  if now < window_end then
    if redis.call('HGET', k.cfg, 'fo') ~= 'grant' then
      redis.call('HINCRBY', k.denials, lk, 1)
      return remember(reply_key, reply_ttl, now, {'recovering', window_end - now})
    end
    recovering = window_end
  end
end

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
  grant, refusal = policy_decide(S, {client = client, user = user, queue = ARGV[13] == '1',
    ticket = ARGV[14] or '', new_ticket = ARGV[15], meta = meta, tenant = tenant,
    license = license, prefix = prefix, seats = cfg.seats, w = w})
  if refusal then
    if refusal[1] ~= 'queued' then redis.call('HINCRBY', k.denials, lk, 1) end
    if refusal[1] == 'denied' or refusal[1] == 'queued' or refusal[1] == 'queue_full' then
      note_refusal(k, lk, client, shown_user, w, now, refusal[1] == 'queued')
    end
    return remember(reply_key, reply_ttl, now, refusal)
  end
  grant.S = S
elseif used - own + w > cfg.limit then
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
  rec.b, etype = 1, reweigh and 'lease.converted' or 'lease.borrowed'
  if machine ~= '' then rec.f = machine end
  bound_to = rec.f
end
-- x: cut to the license's end; tm: the license had terms (heartbeat reads them)
if cut then rec.x = 1 end
if T then rec.tm = 1 end
if grant then
  -- u: the user; g: the group whose reservation the seat is charged to
  if user ~= '' then rec.u = user end
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
redis.call('ZADD', k.leases, deadline_text, sid)
redis.call('HSET', k.sessions, sid, cjson.encode(rec))
redis.call('HSET', k.clients, client, sid)
redis.call('ZADD', k.deadlines, deadline_text, lk .. '|' .. sid)
-- (a grant in a failover's window: the event says so, after the client's metadata)
local event_meta = rec.m
if recovering then event_meta = with_field(rec.m, '"recovering":true') end
emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant, license_id = license,
  session_id = sid, client_id = client, seats_used = used - own + w, seats_total = cfg.seats,
  w = w}, event_meta)
return answer({reweigh and 'renewed' or 'acquired', sid, deadline, lease_ms, used - own + w,
  cfg.seats, cfg.limit, now, is_borrow})
