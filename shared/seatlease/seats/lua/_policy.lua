-- _policy.lua: the license policy and the fair wait queue, for acquire.lua only
-- (shared/seatlease/seats/scripts.py puts it between _lib.lua and acquire.lua, so acquire is
-- still one EVALSHA). docs/design.md, "License policy and the wait queue", states the
-- rules; this file is them. A license without a policy never gets here.
--
-- P, the cached policy (cfg field 'policy', from seatlease.seats.policy.LicensePolicy):
--   mpu        at most this many live leases per user (0: no limit)
--   reserve    {group: seats kept for its members}   rtotal  their sum
--   needs_user 1 when a request must name its user
--   q          1: the queue is on    qt, qh      ticket and hold times, ms
-- and per user the cfg field 'u:<user>': '!' for a denied user, else the names of the
-- user's groups that reserve seats, space separated, in name order (absent: neither).
-- One HGET per user asked about: a large group costs nothing per call.
-- Keys (all of the license's hash tag):
--   users     HASH "u:<user>" -> the user's session ids (space separated, in acquire
--             order); "g:<group>" -> the sessions charged to the group's reservation;
--             "qseq" -> the queue's join counter. A listed session whose lease is gone
--             (released, reclaimed, revoked) is dropped from its list when the list is
--             next read: release and the reaper need not know about policies.
--   queue     ZSET client_id -> join sequence: the FIFO order
--   tickets   HASH client_id -> JSON {t: ticket, u: user, j: joined ms, e: ticket ends
--             ms, o: ms since a seat is held for it (absent: none), m: metadata JSON}
--   tdl       ZSET client_id -> when the ticket drops out: e, or o + hold when sooner

-- acquire.lua calls these six; they are defined by define_policy, which acquire calls
-- only for a license with a policy. Every EVALSHA runs the whole script from the top,
-- creating each function defined at the top level anew: defined inside define_policy,
-- the policy's helpers cost a call without a policy nothing (defined at the top they cost
-- every acquire about 1.2-1.6 us of server time, bench/redis_cost.py --profile). Inside it,
-- `function user_facts(...)` assigns the local declared here (never a global: Redis
-- refuses those).
local user_facts, seat_state, record_lease, drop_ticket, queue_event, policy_decide

local function define_policy()
  -- The waiting tickets one acquire looks at when a seat is free, in order.
  local QUEUE_SCAN = 100

  -- The session ids of list `field` whose lease is still live (one ZMSCORE for them all),
  -- the earliest of their deadlines (nil for none) and whether some are gone. The list is
  -- written back without the gone ones only by the next call that adds to it, so it
  -- never outgrows its live leases by more than the leases that ended since.
  local function live_sids(k, field, now)
    local raw = redis.call('HGET', k.users, field)
    local live = {}
    if not raw then return live, nil end
    local sids = {}
    for sid in string.gmatch(raw, '%S+') do sids[#sids + 1] = sid end
    local scores = redis.call('ZMSCORE', k.leases, unpack(sids))
    local first = nil
    for i, sid in ipairs(sids) do
      local score = tonumber(scores[i])
      if score and score > now then
        live[#live + 1] = sid
        if not first or score < first then first = score end
      end
    end
    return live, first
  end

  -- What the policy says about `user` (cached for the call): {denied = bool, groups = the
  -- user's groups that reserve seats, by name}.
  local facts_cache = {}
  function user_facts(cfg_key, user)
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
  function seat_state(P, k, now, limit, used)
    return {P = P, k = k, now = now, limit = limit, used = used, used0 = used,
            users = {}, groups = {}, rfree = nil}
  end

  local function group_state(S, g)
    local G = S.groups[g]
    if not G then
      local live = live_sids(S.k, 'g:' .. g, S.now)
      G = {list = live, free = math.max(0, (S.P.reserve[g] or 0) - #live)}
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
    local u = S.users[user]
    if not u then
      local list, first = live_sids(S.k, 'u:' .. user, S.now)
      u = {list = list, first = first, extra = 0}
      S.users[user] = u
    end
    return #u.list + u.extra
  end

  -- May `user` take a seat now? Returns true and the group its lease is charged to (false:
  -- none), or false and why not ('denied', 'user_limit', 'seats'). A member takes a seat
  -- of its groups' reservations first (name order), then an unreserved one; anyone else
  -- only an unreserved one: limit - used - reserved_free > 0 (certain without counting
  -- when more seats are free than are reserved in all).
  local function may_take(S, user)
    local P = S.P
    local f = user_facts(S.k.cfg, user)
    if f.denied then return false, 'denied' end
    if P.mpu > 0 and user ~= '' and user_count(S, user) >= P.mpu then
      return false, 'user_limit'
    end
    if S.used >= S.limit then return false, 'seats' end
    for _, g in ipairs(f.groups) do
      if P.reserve[g] and group_state(S, g).free > 0 then return true, g end
    end
    if S.limit - S.used > P.rtotal then return true, false end
    if S.limit - S.used - reserved_free(S) > 0 then return true, false end
    return false, 'seats'
  end

  local function take(S, user, g)
    S.used = S.used + 1
    if S.users[user] then S.users[user].extra = S.users[user].extra + 1 end
    if g then
      S.groups[g].free = S.groups[g].free - 1
      if S.rfree then S.rfree = S.rfree - 1 end
    end
  end

  -- Adds a new lease to its user's list (when the license limits users: a limit set later
  -- counts the leases taken from then on) and to its group's.
  function record_lease(S, user, g, sid)
    if user ~= '' and S.P.mpu > 0 then
      local u = S.users[user]
      local list = u and u.list or live_sids(S.k, 'u:' .. user, S.now)
      list[#list + 1] = sid
      redis.call('HSET', S.k.users, 'u:' .. user, table.concat(list, ' '))
    end
    if g then
      local list = S.groups[g].list
      list[#list + 1] = sid
      redis.call('HSET', S.k.users, 'g:' .. g, table.concat(list, ' '))
    end
  end

  -- `meta` (a JSON object's text) with `fields` ('"a":1,"b":"x"') added last, so ours win
  -- over a client's keys of the same name.
  local function with_fields(meta, fields)
    if meta == nil or meta == '' or meta == '{}' then return '{' .. fields .. '}' end
    return string.sub(meta, 1, -2) .. ',' .. fields .. '}'
  end

  function drop_ticket(k, client)
    redis.call('ZREM', k.queue, client)
    redis.call('HDEL', k.tickets, client)
    redis.call('ZREM', k.tdl, client)
  end

  function queue_event(k, a, etype, client, t, now, extra, sid, used)
    local fields = '"queued_ms":' .. int_arg(now - t.j)
    if extra then fields = fields .. ',' .. extra end
    emit(k.outbox, a.prefix, now, {type = etype, tenant_id = a.tenant, license_id = a.license,
      session_id = sid, client_id = client, seats_used = used, seats_total = a.seats},
      with_fields(t.m, fields))
  end

  -- Tickets whose time ran out (not renewed, or a held seat not taken) leave the queue.
  local function prune_tickets(S, a, limit)
    local k, now = S.k, S.now
    local gone = redis.call('ZRANGEBYSCORE', k.tdl, '-inf', int_arg(now), 'LIMIT', '0',
      int_arg(limit))
    for _, client in ipairs(gone) do
      local raw = redis.call('HGET', k.tickets, client)
      drop_ticket(k, client)
      if raw then
        local t = cjson.decode(raw)
        local reason = 'ticket_expired'
        if t.o and t.o + S.P.qh <= now then reason = 'hold_expired' end
        queue_event(k, a, 'queue.left', client, t, now, '"reason":"' .. reason .. '"')
      end
    end
  end

  -- Serves the queue on the simulated state: walks the first QUEUE_SCAN tickets in order
  -- and gives each whose user may take a seat one, until no seat is left. A ticket that
  -- may not (its user at the per-user limit, or only seats reserved for others free) is
  -- passed over and keeps its place: it blocks nobody behind it. A ticket served for the
  -- first time has its seat held from now: it drops out if it does not come for it within
  -- the hold. Returns the caller's group charge (false: none) when its own ticket is
  -- served, else nil.
  local function serve_queue(S, client, user)
    local k = S.k
    local order = redis.call('ZRANGE', k.queue, 0, QUEUE_SCAN - 1)
    if #order == 0 then return nil end
    local raws = redis.call('HMGET', k.tickets, unpack(order))
    for i, c in ipairs(order) do
      if S.used >= S.limit then break end
      if raws[i] then
        local t = cjson.decode(raws[i])
        local who = t.u or ''
        if c == client then who = user end
        local ok, g = may_take(S, who)
        if ok then
          take(S, who, g)
          if c == client then return g end
          if not t.o then
            t.o = S.now
            redis.call('HSET', k.tickets, c, cjson.encode(t))
            redis.call('ZADD', k.tdl, int_arg(math.min(t.e, S.now + S.P.qh)), c)
          end
        end
      end
    end
    return nil
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

  -- The policy's verdict for one acquire that found no lease of its own: returns
  -- (grant, nil) with grant = {g = group charged or false, ticket = the caller's ticket
  -- record or nil}, or (nil, reply) for a refusal or a place in line. `a` is the call:
  -- client, user, queue (bool), ticket, new_ticket, meta, tenant, license, prefix, seats.
  function policy_decide(S, a)
    local P, k, now = S.P, S.k, S.now
    local mine, waiting = nil, false
    if P.q == 1 and redis.call('ZCARD', k.queue) > 0 then  -- an empty queue costs one read
      waiting = true
      prune_tickets(S, a, 100)
      local raw = redis.call('HGET', k.tickets, a.client)
      if raw then mine = cjson.decode(raw) end
    end
    -- The caller's own per-user limit first: no place in line can help it.
    if P.mpu > 0 and a.user ~= '' and user_count(S, a.user) >= P.mpu then
      local first = S.users[a.user].first  -- when the user's earliest lease ends
      return nil, {'user_limit', P.mpu, user_count(S, a.user), first and first - now or 1000}
    end
    if waiting and S.used < S.limit then
      local g = serve_queue(S, a.client, a.user)
      if g ~= nil then return {g = g, ticket = mine}, nil end
    end
    local ok, g = may_take(S, a.user)
    if ok then return {g = g, ticket = mine}, nil end
    if P.q == 1 and a.queue then
      local t = mine
      if t then  -- a renewal: its place is kept; a seat held for it that is gone is not
        t.e, t.o, t.u = now + P.qt, nil, a.user
        redis.call('HSET', k.tickets, a.client, cjson.encode(t))
        redis.call('ZADD', k.tdl, int_arg(t.e), a.client)
      else
        local seq = redis.call('HINCRBY', k.users, 'qseq', 1)
        t = {t = a.new_ticket, u = a.user, j = now, e = now + P.qt, m = a.meta}
        redis.call('ZADD', k.queue, int_arg(seq), a.client)
        redis.call('HSET', k.tickets, a.client, cjson.encode(t))
        redis.call('ZADD', k.tdl, int_arg(t.e), a.client)
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
      local position = redis.call('ZRANK', k.queue, a.client) + 1
      return nil, {'queued', position, t.t, math.max(1000, retry), S.used0, a.seats}
    end
    return nil, {'denied', S.used0, a.seats, S.limit, retry_ms_for(S, a.user)}
  end
end
