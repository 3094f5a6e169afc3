-- _policy.lua: the license policy and the fair wait queue, for acquire.lua (and for
-- release.lua and reclaim.lua, which hand a seat they free to the queue). scripts.py puts
-- it between _lib.lua and those scripts. docs/design.md, "License policy and the wait
-- queue", states the rules; this file is them. A license without a policy never gets
-- here.
--
-- P, the cached policy (cfg field 'policy', from seatlease.seats.policy.LicensePolicy):
--   mpu        at most this many seats in live leases per user (0: no limit; a lease of
--              weight w counts w)
--   reserve    {group: seats kept for its members}   rtotal  their sum
--   needs_user 1 when a request must name its user
--   q          1: the queue is on    qt, qh      ticket and hold times, ms
-- and per user the cfg field 'u:<user>': '!' for a denied user, else the names of the
-- user's groups that reserve seats, space separated, in name order (absent: neither).
-- One HGET per user asked about: a large group costs nothing per call.
-- Keys (all of the license's hash tag):
--   users     HASH "#u:<user>" -> how many seats of live leases are counted for the user
--             (kept while the license has a per-user limit; a lease so counted has rec.cu,
--             the seats it counts: its weight); "#g:<group>" -> how many seats are charged
--             to the group's reservation (rec.cg: the seats charged, at most the lease's
--             weight; the rest of a weighted lease is unreserved seats); "qseq" -> the
--             queue's join counter. Acquire adds to
--             a count, and whatever ends a lease (release, revoke, reclaim by acquire,
--             heartbeat or the reaper: _lib.lua's uncount) takes it off; a count at 0 is
--             deleted, so the hash holds only users and groups with live leases. Reading
--             a count is one HMGET (with the old list's field), whatever its size:
--             nothing is ever unpacked per lease. (Before counts, "u:<user>" and
--             "g:<group>" held the session ids: such a list is turned into a count when
--             first read, count_of below.)
--   queue     ZSET client_id -> join sequence: the FIFO order
--   tickets   HASH client_id -> JSON {t: ticket, u: user (the policy's form of it), s:
--             the user as sent (absent when the same), h: host, j: joined ms, e: ticket
--             ends ms, o: ms since a seat is held for it (absent: none), w: the seats it
--             waits for (absent: 1)}: what granting
--             and the audit need, never the request's metadata (a few hundred bytes)
--   tdl       ZSET client_id -> when the ticket drops out: e, or o + hold when sooner
--   tix       ZSET per shard "<tenant>/<license>|<client_id>" -> the same time: the
--             reaper's index of lapsed tickets (sweep_tickets.lua), like `deadlines`

-- The helpers below are top-level local functions: the seat library's functions (FCALL,
-- scripts.py) run this top level once, at FUNCTION LOAD, so they are defined once. (An
-- EVALSHA script, a server without functions, defines them on each call.)

-- What the policy said of each user in this call (user_facts): a call's own, so begun
-- anew by begin_policy, which every call using the policy makes first (acquire.lua, and
-- release.lua and reclaim.lua for a license with a queue).
local facts_cache

-- The waiting tickets one acquire looks at when a seat is free, in order (lapsed ones
-- it meets are dropped and not counted), and the most it drops on the way.
local QUEUE_SCAN = 100
-- (a drop is a few removals and a queue.left event: 100 a walk, beside the prune's 100,
-- bound a call's walk to a few ms however many tickets lapsed at once;
-- tests/test_script_time_bounds.py)
local LAPSED_DROPS = 100
-- The session ids one command is given when a list is read (Lua's unpack fails near
-- 8,000 values): only for a list written before counts, count_of.
local LIST_CHUNK = 1000

-- How many live leases count field `kind`:`name` holds ('u' a user, 'g' a group):
-- one HMGET. A list of session ids written before counts existed (field "u:<user>" or
-- "g:<group>") becomes a count here, once: each of its leases still in `leases` is
-- marked counted (rec.cu or rec.cg) so that its end takes it off (_lib.lua's uncount),
-- the list is deleted and the count written. The list is read in chunks.
local function count_of(k, kind, name)
  local v = redis.call('HMGET', k.users, '#' .. kind .. ':' .. name, kind .. ':' .. name)
  if v[1] then return tonumber(v[1]) end
  local raw = v[2]
  if not raw then return 0 end
  redis.call('HDEL', k.users, kind .. ':' .. name)
  local sids = {}
  for sid in string.gmatch(raw, '%S+') do sids[#sids + 1] = sid end
  local mark, count = (kind == 'u') and 'cu' or 'cg', 0
  for i = 1, #sids, LIST_CHUNK do
    local chunk = {}
    for j = i, math.min(i + LIST_CHUNK - 1, #sids) do chunk[#chunk + 1] = sids[j] end
    local scores = redis.call('ZMSCORE', k.leases, unpack(chunk))
    local recs = redis.call('HMGET', k.sessions, unpack(chunk))
    for j, sid in ipairs(chunk) do
      if scores[j] and recs[j] then
        local rec = cjson.decode(recs[j])
        if not rec[mark] then
          rec[mark] = 1
          redis.call('HSET', k.sessions, sid, cjson.encode(rec))
          count = count + 1
        end
      end
    end
  end
  if count > 0 then redis.call('HSET', k.users, '#' .. kind .. ':' .. name, count) end
  return count
end

-- What the policy says about `user` (cached for the call): {denied = bool, groups = the
-- user's groups that reserve seats, by name}.
local function user_facts(cfg_key, user)
  local f = facts_cache[user]
  if f then return f end
  f = {denied = false, groups = {}}
  if user ~= '' then
    local raw = redis.call('HGET', cfg_key, 'u:' .. user)
    if raw == '!' then
      f.denied = true
    elseif raw then
      for g in string.gmatch(raw, '%S+') do f.groups[#f.groups + 1] = g end
    end
  end
  facts_cache[user] = f
  return f
end

-- The seats a decision works on. Counts are read when first needed; `take` applies a
-- grant, real or simulated (a waiting ticket served ahead of the caller). A lease is
-- charged to at most one group, so a group never holds more charged leases than its
-- reservation: a group's `free` is what is left of it, `rfree` the sum over the groups.
-- The counts include a lease whose deadline passed and that is not reclaimed yet
-- (acquire reclaims 100 of the license's first, the reaper the rest within a minute):
-- a rule may then be stricter for that while, never looser.
local function seat_state(P, k, now, limit, used)
  return {P = P, k = k, now = now, limit = limit, used = used, used0 = used,
          users = {}, groups = {}, rfree = nil}
end

local function group_state(S, g)
  local G = S.groups[g]
  if not G then
    G = {free = math.max(0, (S.P.reserve[g] or 0) - count_of(S.k, 'g', g))}
    S.groups[g] = G
  end
  return G
end

local function reserved_free(S)
  if not S.rfree then
    local sum = 0
    for g, _ in pairs(S.P.reserve) do sum = sum + group_state(S, g).free end
    S.rfree = sum
  end
  return S.rfree
end

local function user_count(S, user)
  local n = S.users[user]
  if not n then
    n = count_of(S.k, 'u', user)
    S.users[user] = n
  end
  return n
end

-- May `user` take `w` seats now? Returns true, the group its lease is charged to
-- (false: none) and how many of the w seats are charged to it, or false and why not
-- ('denied', 'user_limit', 'seats'). A member takes seats of its groups' reservations
-- first (the first group, in name order, whose free reserved seats and the unreserved
-- free seats together make w: as many as it can of that group's, the rest unreserved);
-- anyone else only unreserved seats: limit - used - reserved_free >= w (certain without
-- counting when more seats are free than are reserved in all).
local function may_take(S, user, w)
  local P = S.P
  local f = user_facts(S.k.cfg, user)
  if f.denied then return false, 'denied' end
  if P.mpu > 0 and user ~= '' and user_count(S, user) + w > P.mpu then
    return false, 'user_limit'
  end
  if S.used + w > S.limit then return false, 'seats' end
  for _, g in ipairs(f.groups) do
    if P.reserve[g] then
      local free = group_state(S, g).free
      if free > 0 then
        local charged = math.min(w, free)
        if w - charged <= S.limit - S.used - reserved_free(S) then return true, g, charged end
      end
    end
  end
  if S.limit - S.used - P.rtotal >= w then return true, false, 0 end
  if S.limit - S.used - reserved_free(S) >= w then return true, false, 0 end
  return false, 'seats'
end

-- The caller's own lingering lease `rec`, taken back with another weight: its seats
-- are free for it (S.used already leaves them out), its user's count and its group's
-- charge too, so that it is judged as a new lease would be.
local function set_aside(S, rec, user)
  if rec.cu and rec.u and rec.u == user then
    S.users[user] = math.max(0, count_of(S.k, 'u', user) - rec.cu)
  end
  if rec.cg and rec.g then
    local left = count_of(S.k, 'g', rec.g) - rec.cg
    S.groups[rec.g] = {free = math.max(0, (S.P.reserve[rec.g] or 0) - left)}
  end
end

local function take(S, user, w, g, charged)
  S.used = S.used + w
  if S.users[user] then S.users[user] = S.users[user] + w end
  if g then
    S.groups[g].free = S.groups[g].free - charged
    if S.rfree then S.rfree = S.rfree - charged end
  end
end

-- Counts a new lease of `w` seats (record `rec`, not yet stored) for its user (when the
-- license limits users: a limit set later counts the leases taken from then on) and
-- `charged` of them for its group, and marks the record so that its end uncounts them.
local function record_lease(S, user, g, rec, w, charged)
  if user ~= '' and S.P.mpu > 0 then
    redis.call('HINCRBY', S.k.users, '#u:' .. user, w)
    rec.cu = w
  end
  if g then
    redis.call('HINCRBY', S.k.users, '#g:' .. g, charged)
    rec.cg = charged
  end
end

local function drop_ticket(k, client)
  redis.call('ZREM', k.queue, client)
  redis.call('HDEL', k.tickets, client)
  redis.call('ZREM', k.tdl, client)
  redis.call('ZREM', k.tix, k.lk .. '|' .. client)
end

-- A ticket's end, in both of its indexes: the license's and the shard's (the reaper's).
local function ticket_ends(k, client, at)
  local text = int_arg(at)
  redis.call('ZADD', k.tdl, text, client)
  redis.call('ZADD', k.tix, text, k.lk .. '|' .. client)
end

local function queue_event(k, a, etype, client, t, now, extra, sid, used)
  local fields = '"queued_ms":' .. int_arg(now - t.j)
  if extra then fields = fields .. ',' .. extra end
  emit(k.outbox, a.prefix, now, {type = etype, tenant_id = a.tenant, license_id = a.license,
    session_id = sid, client_id = client, seats_used = used, seats_total = a.seats,
    w = t.w}, ticket_meta(t, fields))
end

-- Drops a ticket whose time ran out (`raw`: its record) with queue.left saying why.
local function lapse(S, a, client, raw)
  drop_ticket(S.k, client)
  if raw then
    local t = cjson.decode(raw)
    local reason = 'ticket_expired'
    if t.o and t.o + S.P.qh <= S.now then reason = 'hold_expired' end
    queue_event(S.k, a, 'queue.left', client, t, S.now, '"reason":"' .. reason .. '"')
  end
end

-- Tickets whose time ran out (not renewed, or a held seat not taken) leave the queue.
local function prune_tickets(S, a, limit)
  local k, now = S.k, S.now
  local gone = redis.call('ZRANGEBYSCORE', k.tdl, '-inf', int_arg(now), 'LIMIT', '0',
    int_arg(limit))
  for _, client in ipairs(gone) do lapse(S, a, client, redis.call('HGET', k.tickets, client)) end
end

-- Serves the queue on the simulated state: walks the first QUEUE_SCAN live tickets in
-- order and gives each whose user may take a seat one, until no seat is left. A ticket
-- whose time ran out is never served: the walk drops it (queue.left) and goes on, up
-- to LAPSED_DROPS of them (the next calls and the reaper drop the rest); a walk cut
-- short by that bound holds the seats still free for the line it did not reach (so a
-- newcomer never takes one ahead of a live ticket behind the lapsed ones: it is told
-- to come back in a second, by when the next call has walked on). A ticket that may
-- not (its user at the per-user limit, or only seats reserved for others free) is
-- passed over and keeps its place: it blocks nobody behind it. A ticket served for the
-- first time has its seat held from now: it drops out if it does not come for it
-- within the hold.
-- A ticket waiting for w > 1 seats when fewer are free *gathers* them: the unreserved
-- free seats are held for it (nobody behind it takes them, else a stream of one-seat
-- callers would starve it), only seats reserved for the groups of those behind still
-- go to them; when w are free it is served, and its hold starts then. (Gathered seats
-- are held for it only while its ticket lives, so a ticket that stops renewing frees
-- them at its end.)
-- Returns the caller's group charge (false: none) and the seats charged to it when
-- its own ticket is served, else nil, and how many seats are held for others (for the
-- caller's refusal) and when the first hold ends (nil: none yet, only gathering).
local function serve_queue(S, a, client, user)
  local k, now = S.k, S.now
  local seen, dropped, held, hold_ends = 0, 0, 0, nil
  while seen < QUEUE_SCAN and S.used < S.limit do
    local order = redis.call('ZRANGE', k.queue, seen, QUEUE_SCAN - 1)
    if #order == 0 then break end
    local raws = redis.call('HMGET', k.tickets, unpack(order))
    local ends = redis.call('ZMSCORE', k.tdl, unpack(order))
    local lapsed = 0
    for i, c in ipairs(order) do
      if S.used >= S.limit then break end
      local ends_at = tonumber(ends[i])
      if not ends_at or ends_at <= now then
        if dropped < LAPSED_DROPS then
          lapse(S, a, c, raws[i])
          dropped, lapsed = dropped + 1, lapsed + 1
        end
      else
        seen = seen + 1
        if raws[i] then
          local t = cjson.decode(raws[i])
          local who, w = t.u or '', t.w or 1
          if c == client then who, w = user, a.w end
          local ok, g, charged = may_take(S, who, w)
          if ok then
            take(S, who, w, g, charged)
            if c == client then return g, held, hold_ends, charged end
            if not t.o then
              t.o = now
              redis.call('HSET', k.tickets, c, cjson.encode(t))
              ends_at = math.min(t.e, now + S.P.qh)
              ticket_ends(k, c, ends_at)
            end
            held = held + w
            if not hold_ends or ends_at < hold_ends then hold_ends = ends_at end
          elseif g == 'seats' and w > 1 then
            -- gathers: the unreserved free seats are held for it
            local gathered = math.max(0, S.limit - S.used - reserved_free(S))
            S.used = S.used + gathered
            held = held + gathered
            if c == client then return nil, held, hold_ends end
          end
        end
      end
    end
    if lapsed == 0 or dropped >= LAPSED_DROPS then break end
  end
  if dropped >= LAPSED_DROPS and S.used < S.limit then  -- cut short: the rest is the line's
    held = held + (S.limit - S.used)
    S.used = S.limit
    if not hold_ends or now + 1000 < hold_ends then hold_ends = now + 1000 end
  end
  return nil, held, hold_ends
end

-- A seat release.lua freed (`used` seats in use now) goes to the queue at once: the
-- waiting tickets that may take a seat have it held from now, so the hold (and
-- `seatlease status`) starts when the seat frees, not at the next acquire.
local function hold_for_queue(P, k, now, limit, used, a)
  if P.q ~= 1 or redis.call('ZCARD', k.queue) == 0 then return end
  local S = seat_state(P, k, now, limit, used)
  prune_tickets(S, a, 100)
  serve_queue(S, a, nil, nil)
end

-- The first live lease, in deadline order, whose end would give `user` a seat: one not
-- charged to a group, or charged to one of the user's groups. Its remaining time is the
-- user's true Retry-After (with reservations, the earliest lease may free a seat the
-- user cannot take). Looks at the first 20; past them, the 20th deadline (a lower bound).
local function retry_ms_for(S, user)
  local k, now = S.k, S.now
  local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
    'WITHSCORES', 'LIMIT', '0', '20')
  if #first == 0 then return 1000 end
  if S.P.rtotal == 0 then return tonumber(first[2]) - now end
  local mine = {}
  for _, g in ipairs(user_facts(k.cfg, user).groups) do mine[g] = true end
  local sids = {}
  for i = 1, #first, 2 do sids[#sids + 1] = first[i] end
  local recs = redis.call('HMGET', k.sessions, unpack(sids))
  for i, raw in ipairs(recs) do
    if raw then
      local rec = cjson.decode(raw)
      if not rec.g or mine[rec.g] then return tonumber(first[2 * i]) - now end
    end
  end
  return tonumber(first[#first]) - now
end

-- When `user`'s earliest live lease ends, from now: the license's first 100 leases in
-- deadline order are read; past them, the 100th deadline (a lower bound). Only a
-- refusal at the per-user limit asks.
local function user_retry_ms(S, user)
  local k, now = S.k, S.now
  local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
    'WITHSCORES', 'LIMIT', '0', '100')
  if #first == 0 then return 1000 end
  local sids = {}
  for i = 1, #first, 2 do sids[#sids + 1] = first[i] end
  local recs = redis.call('HMGET', k.sessions, unpack(sids))
  for i, raw in ipairs(recs) do
    if raw and cjson.decode(raw).u == user then return tonumber(first[2 * i]) - now end
  end
  return tonumber(first[#first]) - now
end

-- The queue's bound: the policy's queue_max, or 10 x seats, at most 10,000.
local function queue_max(P, seats)
  if P.qm and P.qm > 0 then return P.qm end
  return math.min(10 * seats, 10000)
end

-- What a new ticket keeps of the request's metadata: its host, and its user as sent
-- (ARGV's user is the policy's form of it), nothing else.
local function identity_of(meta)
  local ok, m = pcall(cjson.decode, meta or '{}')
  if not ok or type(m) ~= 'table' then return nil, nil end
  local user, host = m.user, m.host
  if type(user) ~= 'string' then user = nil end
  if type(host) ~= 'string' then host = nil end
  return user, host
end

-- The refusal of a caller who gets no seat and no place in line, saying why the seats
-- that are not in use are not its: {'denied', used, seats, limit, retry_ms, held,
-- reserved}. `held` seats are held for tickets ahead (served just now, or before):
-- retry when the first hold ends, as the seat is the caller's if that ticket does not
-- come for it. `reserved`: the seats left free are reserved for groups the caller is not
-- in: retry when a lease ends that would give it a seat. Neither: the license is full.
local function refusal(S, a, held, hold_ends)
  -- (of the free seats, those reserved for others: all of them for a one-seat caller,
  -- whom any other free seat would have served)
  local reserved = math.min(math.max(0, S.limit - S.used), reserved_free(S))
  local retry
  if held > 0 and hold_ends then
    retry = math.max(1, hold_ends - S.now)
  else
    retry = retry_ms_for(S, a.user)
  end
  return {'denied', S.used0, a.seats, S.limit, retry, held, reserved}
end

-- A re-admission the cap does not bind (acquire.lua: a borrow the service lost, or a
-- license that chose availability in a failover's window): the deny list and the
-- per-user limit still judge it; no seat is held for the queue, no reservation charged.
local function policy_admit(S, a)
  if user_facts(S.k.cfg, a.user).denied then return nil, {'user_denied'} end
  if S.P.mpu > 0 and a.user ~= '' and user_count(S, a.user) + a.w > S.P.mpu then
    return nil, {'user_limit', S.P.mpu, user_count(S, a.user), user_retry_ms(S, a.user)}
  end
  return {g = false, c = 0}, nil
end

-- The caller's own ticket, when the license's queue holds any: lapsed tickets are pruned
-- first. Returns whether anybody waits, and the caller's live ticket record (nil: none).
-- The caller's own ticket counts only while it lives and stands in line: one that ran
-- out (behind more lapsed tickets than the prune drops) leaves now, with its queue.left,
-- and the caller is a newcomer (its seat, or a place at the back).
local function own_ticket(S, a)
  local k, now = S.k, S.now
  if S.P.q ~= 1 or redis.call('ZCARD', k.queue) == 0 then  -- an empty queue: one read
    return false, nil
  end
  prune_tickets(S, a, 100)
  local raw = redis.call('HGET', k.tickets, a.client)
  if not raw then return true, nil end
  local ends = tonumber(redis.call('ZSCORE', k.tdl, a.client))
  if ends and ends > now and redis.call('ZSCORE', k.queue, a.client) then
    return true, cjson.decode(raw)
  end
  lapse(S, a, a.client, raw)
  return true, nil
end

-- More seats than this user can ever take (the seats not reserved for groups it is not
-- in): no place in line, which would gather seats for it forever.
local function beyond_reach(S, a)
  if a.w <= 1 then return false end
  local reachable = S.limit - S.P.rtotal
  for _, name in ipairs(user_facts(S.k.cfg, a.user).groups) do
    reachable = reachable + (S.P.reserve[name] or 0)
  end
  return a.w > reachable
end

-- The caller's place in line: its ticket `t` renewed (its place is kept; a seat held for
-- it that is gone is not), or a new ticket at the back (queue.joined), or no room
-- ('queue_full'). Returns the reply: {'queued', ...} or {'queue_full', ...}.
local function join_queue(S, a, t)
  local P, k, now = S.P, S.k, S.now
  if t then
    t.e, t.o, t.u = now + P.qt, nil, a.user
    t.w = a.w > 1 and a.w or nil
    redis.call('HSET', k.tickets, a.client, cjson.encode(t))
    ticket_ends(k, a.client, t.e)
  else
    local qmax = queue_max(P, a.seats)
    local waiting_now = redis.call('ZCARD', k.queue)
    if waiting_now >= qmax then
      return {'queue_full', qmax, waiting_now, S.used0, a.seats}
    end
    local seq = redis.call('HINCRBY', k.users, 'qseq', 1)
    local sent, host = identity_of(a.meta)
    if sent == a.user then sent = nil end  -- "s" only when it differs from "u"
    t = {t = a.new_ticket, u = a.user, s = sent, h = host, j = now, e = now + P.qt,
         w = a.w > 1 and a.w or nil}
    redis.call('ZADD', k.queue, int_arg(seq), a.client)
    redis.call('HSET', k.tickets, a.client, cjson.encode(t))
    ticket_ends(k, a.client, t.e)
    queue_event(k, a, 'queue.joined', a.client, t, now, nil, nil, S.used0)
  end
  -- Come back well within the hold, and before the ticket runs out; sooner only if a
  -- lease ends sooner (the earliest one bounds them all: no need to look further).
  local retry = math.min(math.floor(P.qt / 3), math.floor(P.qh / 3))
  local first = redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf',
    'WITHSCORES', 'LIMIT', '0', '1')
  if #first > 0 and tonumber(first[2]) - now < retry then
    retry = math.min(retry, retry_ms_for(S, a.user))
  end
  local position = redis.call('ZRANK', k.queue, a.client) + 1  -- (in line: above)
  return {'queued', position, t.t, math.max(1000, retry), S.used0, a.seats}
end

-- The policy's verdict for one acquire that found no lease of its own: returns
-- (grant, nil) with grant = {g = group charged or false, c = the seats charged to it,
-- ticket = the caller's ticket record or nil}, or (nil, reply) for a refusal or a place
-- in line. `a` is the call: client, user, queue (bool), ticket, new_ticket, meta, tenant,
-- license, prefix, seats, w.
local function policy_decide(S, a)
  local P = S.P
  local waiting, mine = own_ticket(S, a)
  -- The caller's own per-user limit first: no place in line can help it.
  if P.mpu > 0 and a.user ~= '' and user_count(S, a.user) + a.w > P.mpu then
    return nil, {'user_limit', P.mpu, user_count(S, a.user), user_retry_ms(S, a.user)}
  end
  local held, hold_ends = 0, nil
  if waiting and S.used < S.limit then
    local g, charged
    g, held, hold_ends, charged = serve_queue(S, a, a.client, a.user)
    if g ~= nil then return {g = g, c = charged, ticket = mine}, nil end
  end
  local ok, g, charged = may_take(S, a.user, a.w)
  if ok then return {g = g, c = charged, ticket = mine}, nil end
  -- (a ticket it holds is not renewed: it lapses)
  if beyond_reach(S, a) then return nil, refusal(S, a, held, hold_ends) end
  if P.q == 1 and a.queue then return nil, join_queue(S, a, mine) end
  return nil, refusal(S, a, held, hold_ends)
end

-- Every call that uses the policy begins with this: the per-call state starts here.
local function begin_policy()
  facts_cache = {}
end
