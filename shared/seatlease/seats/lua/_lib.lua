-- _lib.lua: helpers shared by every seat script. shared/seatlease/seats/scripts.py puts
-- this file before each script's own code (once for the seat library's functions, in each
-- EVAL script for the rest), so every seat call is still one command.
--
-- Key layout (all keys of one call share the hash tag {shard}, see shared/seatlease/seats/keys.py):
--   leases    ZSET  session_id -> deadline (ms, Redis server time); live iff deadline > now
--   sessions  HASH  session_id -> JSON {"c": client_id, "a": acquired_ms, "l": lease_ms,
--                   "m": metadata JSON text, "t": the license's seats at acquire,
--                   "b": 1 when borrowed (no heartbeats; "l" is the borrow's length),
--                   "lg": 1 while lingering (released by its client, the seat still held
--                   for that client until the deadline; "b" and "lg" are absent otherwise),
--                   with a license policy "u": user, "g": the group charged, "cu"/"cg": 1
--                   when counted in the users hash (uncount below); "iw": when an idle
--                   lease is reclaimed (its warning, _idle.lua); "sh": its share group
--                   (shared seats, below)}
--   clients   HASH  client_id -> session_id (re-acquire by the same client returns its lease,
--                   a lingering one included)
--   deadlines ZSET  per shard: "<tenant>/<license>|<session_id>" -> deadline (the reaper's index)
--   outbox    STREAM per shard: one entry per lease event, field "e" = the event's JSON as
--             published (emit below is the one place its shape is written); the reaper
--             drains it to Pub/Sub without decoding it
--   cfg       HASH  cached license configuration (exists, seats, lease_seconds, ...,
--                   policy: only for a license with a policy, see _policy.lua)
--   replies:0, replies:1  HASH  the license's stored replies of two generations (replay and
--             remember in _replies.lua)
--   rate      string per shard and tenant: the tenant's rate budget (_ratelimit.lua)
--   users     HASH  the license policy's live counts (_policy.lua), kept by drop_lease
--   wsum      STRING the sum of w - 1 over the license's leases of weight w > 1 (rec.w;
--                   absent: 1), stored and not yet reclaimed (add_weight below)
--   units     ZSET  the release before's weighted leases' other seats (drop_units below)
--   idlers    ZSET  session_id -> idle_reclaim_at (ms) of the license's warned idle leases
--                   (_idle.lua)

-- Milliseconds from the Redis server clock: function instances' clocks differ.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An integral number as the text redis.call and concatenation would make of it, formatted
-- with '%d'. A Lua number handed to redis.call is formatted by Redis with '%.17g', one
-- concatenated (an event's JSON) by Lua with '%.14g': glibc's float printing, and an
-- acquire did about ten of them. For an integer under 1e14 in magnitude the three texts are
-- the same; any other number, zero included (-0 prints as "-0"), is returned as it is, to
-- be formatted as before. A value used twice (the deadline) is passed through once.
-- (bench/lua_int_format.py measures it; a per-call cache of the texts costs more than it
-- saves.) `format` is string.format, set by begin_call below.
local format
local function int_arg(n)
  if n % 1 == 0 and n < 1e14 and n > -1e14 and n ~= 0 then return format('%d', n) end
  return n
end

-- RFC 3339 UTC with milliseconds ("2026-11-22T12:00:00.000Z") for ms since the epoch;
-- Redis's Lua has no os.date. Days to a civil date: H. Hinnant's civil_from_days, made
-- once a day: the seat library's functions (FCALL) keep the last day's text from one call
-- to the next (an EVALSHA script makes it once a call).
local date_day, date_text
local function rfc3339(ms)
  local floor = math.floor  -- (15 uses: a local, not a table lookup each time)
  local secs = floor(ms / 1000)
  local days = floor(secs / 86400)
  local rem = secs - days * 86400
  if days ~= date_day then
    local z = days + 719468
    local era = floor(z / 146097)
    local doe = z - era * 146097
    local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524)
      - floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
    local mp = floor((5 * doy + 2) / 153)
    local day = doy - floor((153 * mp + 2) / 5) + 1
    local month = mp < 10 and mp + 3 or mp - 9
    local year = yoe + era * 400 + (month <= 2 and 1 or 0)
    date_day, date_text = days, string.format('%04d-%02d-%02dT', year, month, day)
  end
  return date_text .. string.format('%02d:%02d:%02d.%03dZ', floor(rem / 3600),
    floor(rem % 3600 / 60), rem % 60, ms % 1000)
end

-- Event ids are "<prefix>-<n>": the prefix is random per call (from Python), n counts
-- the events this call wrote, so ids stay unique even if Redis loses its data.
local event_seq = 0

-- The events of one call share its `now`: format it once.
local last_at, last_text
local function occurred(at)
  if at ~= last_at then last_at, last_text = at, rfc3339(at) end
  return last_text
end

-- Every seat script's first step (scripts.py puts the call before the binding of the
-- script's named KEYS and ARGV, `k` and `a`, and its own code).
-- As an EVALSHA script the top level runs anew on each call; as a function of the seat
-- library (Redis 7 FCALL, scripts.py) it ran once, at FUNCTION LOAD, where Lua's own
-- libraries cannot be reached: so the per-call state starts here, not at the top level.
-- (last_at and last_text may carry over, as rfc3339's day: they cache a pure function.)
local function begin_call()
  format = string.format
  event_seq = 0
end

local function text_or_null(v) if v == nil then return 'null' end return '"' .. v .. '"' end
local function number_or_null(v) if v == nil then return 'null' end return int_arg(v) end

-- Appends one lease event to the shard's outbox, as the JSON the reaper publishes and the
-- audit function stores (docs/design.md, "Events"): the one place its shape is written.
-- `e` holds type, tenant_id, license_id and, when known, session_id, client_id,
-- seats_used, seats_total, count, and `w`: the lease's (or ticket's) weight, written as
-- "seats" when it is more than 1 (absent: 1, as in the answers; so an audit function of
-- the release before weights, which refuses a field it does not know, still stores
-- every event of a license without weighted leases during an upgrade); `at` is its time
-- in ms; `meta` the metadata object's
-- JSON text (json.dumps in engine.py), spliced in as it is. The JSON is concatenated, not
-- cjson-encoded (half the cost, measured): every text field is an identifier of
-- [A-Za-z0-9._:@-] (checked at the HTTP door and by the admin actions) or a constant, so
-- nothing needs escaping, and cjson would round the metadata's numbers.
local function emit(outbox, prefix, at, e, meta)
  event_seq = event_seq + 1
  if meta == nil or meta == '' then meta = '{}' end
  redis.call('XADD', outbox, '*', 'e', '{"event_id":"' .. prefix .. '-' .. int_arg(event_seq)
    .. '","type":"' .. e.type .. '","tenant_id":"' .. e.tenant_id
    .. '","license_id":"' .. e.license_id .. '","session_id":' .. text_or_null(e.session_id)
    .. ',"client_id":' .. text_or_null(e.client_id) .. ',"occurred_at":"' .. occurred(at)
    .. '","seats_used":' .. number_or_null(e.seats_used)
    .. ',"seats_total":' .. number_or_null(e.seats_total) .. ',"count":' .. int_arg(e.count or 1)
    .. ((e.w and e.w > 1) and ',"seats":' .. int_arg(e.w) or '') .. ',"metadata":' .. meta
    .. '}')
end

-- A wait-queue event's metadata (queue.joined, .granted, .left): the ticket's user and
-- host (cjson escapes them: they may be any text) and `fields` ('"a":1,"b":"x"'), never
-- the request's metadata. (The ticket's weight is the event's "seats": emit's e.w.)
local function ticket_meta(t, fields)
  local who = {}
  if t.s then who.user = t.s elseif t.u and t.u ~= '' then who.user = t.u end  -- as sent
  if t.h then who.host = t.h end
  if next(who) == nil then return '{' .. fields .. '}' end
  local text = cjson.encode(who)
  return string.sub(text, 1, -2) .. ',' .. fields .. '}'
end

-- Weighted seats: a lease of weight w > 1 (rec.w) counts as w seats, at O(1) a call
-- whatever w (docs/design.md, "Weighted seats"): the license's `wsum` holds the sum of
-- w - 1 over its weighted leases stored (live, or expired and not yet reclaimed), kept by
-- add_weight and drop_weight, one INCRBY or DECRBY; moving a weighted lease's deadline
-- costs nothing more than a plain lease's. The seats in use at `now` are the live leases
-- plus wsum less the extra seats of the leases whose deadline has passed (live_extra
-- reads those leases' records, at most EXPIRED_READ of them, and only when the license
-- has weighted leases): exact whenever at most that many of the license's leases have
-- expired and not been reclaimed (an acquire prunes 100 first, the reaper the rest), and
-- otherwise counting more seats than are in use, never fewer. A record counted in the
-- sum has ws = 1.
-- A weighted lease of the release before this one ("units": its w - 1 seats were each a
-- member "<sid>#2" .. "<sid>#<w>" of the `units` ZSET, O(w) a call) is still counted
-- through `units`, and moves to the sum the first time a call moves its deadline
-- (set_weight); units that a call of that release added to a lease counted in the sum,
-- while both releases ran, are dropped with it. A license without weights pays one GET of
-- an absent key and one ZCARD of an empty one.
local UNIT_CHUNK = 1000  -- (the release before's units: members a command)
local EXPIRED_READ = 100

local function drop_units(units, sid, w)
  local members = {}
  for i = 2, w do members[#members + 1] = sid .. '#' .. i end
  for i = 1, #members, UNIT_CHUNK do
    redis.call('ZREM', units, unpack(members, i, math.min(i + UNIT_CHUNK - 1, #members)))
  end
end

-- A new lease of weight w (its record `rec`, not yet stored) is counted.
local function add_weight(k, rec, w)
  if w <= 1 then return end
  rec.ws = 1
  redis.call('INCRBY', k.wsum, int_arg(w - 1))
end

-- A lease's deadline moves: one of the release before (units) is counted in the sum from
-- now on (its record gets ws = 1: the caller stores it).
local function set_weight(k, sid, rec)
  local w = rec.w
  if w and w > 1 and not rec.ws then
    drop_units(k.units, sid, w)
    add_weight(k, rec, w)
  end
end

local function drop_weight(k, sid, rec)
  local w = rec.w
  if not w or w <= 1 then return end
  if rec.ws then
    redis.call('DECRBY', k.wsum, int_arg(w - 1))
    -- units that a call of the release before added while both ran (an upgrade)
    if not redis.call('ZSCORE', k.units, sid .. '#2') then return end
  end
  drop_units(k.units, sid, w)
end

-- The extra seats (w - 1 each) of the live weighted leases at `now`: the sum, less those
-- of the leases stored whose deadline has passed.
local function live_extra(k, now)
  local sum = tonumber(redis.call('GET', k.wsum) or 0)
  if sum <= 0 then return 0 end
  local expired = redis.call('ZRANGEBYSCORE', k.leases, '-inf', int_arg(now), 'LIMIT', '0',
    int_arg(EXPIRED_READ))
  if #expired == 0 then return sum end
  for _, raw in ipairs(redis.call('HMGET', k.sessions, unpack(expired))) do
    if raw then
      local rec = cjson.decode(raw)
      if rec.ws and rec.w then sum = sum - (rec.w - 1) end
    end
  end
  return math.max(0, sum)
end

-- Shared seats (docs/design.md, "Shared seats"): the leases of one share group (the same
-- user, host, or both, on a license that shares) count as the group's seats, not one
-- seat each. The license's `users` hash holds, per group, "#s:<key>" -> "<sessions>
-- <seats>", and "#ssum" -> the sum over the groups of sessions - seats: the leases stored
-- beyond their groups' seats, which the seat count leaves out. A group's seats never
-- exceed its sessions and are at least 1 while it has any, so the count is the seats the
-- groups hold. O(1) a call whatever the group's size. A license without shared leases
-- pays one HGET of an absent field.
local function shared_extra(k)
  if not k.users then return 0 end
  return tonumber(redis.call('HGET', k.users, '#ssum') or 0)
end

local function share_group(users, key)
  local v = redis.call('HGET', users, '#s:' .. key)
  if not v then return 0, 0 end
  local n, seats = string.match(v, '^(%d+) (%d+)$')
  return tonumber(n), tonumber(seats)
end

-- A new lease joins group `key`: on a new seat of the group (`new_seat`), or on one it
-- holds. Returns the group's sessions after it.
local function join_share(users, key, new_seat)
  local n, seats = share_group(users, key)
  n = n + 1
  if new_seat then
    seats = seats + 1
  else
    redis.call('HINCRBY', users, '#ssum', 1)
  end
  redis.call('HSET', users, '#s:' .. key, int_arg(n) .. ' ' .. int_arg(seats))
  return n
end

-- A group of one user's sessions (its key names the user: 'u|', 'uh|') carries that
-- user's policy count (a per-user limit's, '#u:<user>') for a seat whose taker left while
-- others keep it: "#sc:<key>" the seats so carried, "#su:<key>" the user. It gives them
-- back as the group gives up seats (and all of them at its end), so a user's count is
-- the seats its leases hold, whichever of its sessions took them.
local function give_back(users, key, seats)
  local carried = tonumber(redis.call('HGET', users, '#sc:' .. key) or 0)
  if carried <= 0 or seats <= 0 then return end
  local back = math.min(carried, seats)
  local user = redis.call('HGET', users, '#su:' .. key)
  if user and redis.call('HINCRBY', users, '#u:' .. user, -back) <= 0 then
    redis.call('HDEL', users, '#u:' .. user)
  end
  if carried - back <= 0 then
    redis.call('HDEL', users, '#sc:' .. key, '#su:' .. key)
  else
    redis.call('HINCRBY', users, '#sc:' .. key, -back)
  end
end

-- A lease of a group (rec.sh) ends: the group keeps its seats while it has as many
-- sessions; a seat goes when fewer are left (the last session's end frees the last).
-- Returns whether its user's count stays with the group (the caller's uncount skips it).
local function leave_share(users, rec)
  local key = rec.sh
  local n, seats = share_group(users, key)
  if n == 0 then return false end
  n = n - 1
  local freed = math.max(0, seats - n)
  local own = (rec.cu and rec.u) and rec.cu or 0
  local carried = false
  if own > 0 and freed < own and string.sub(key, 1, 2) ~= 'h|' then
    redis.call('HINCRBY', users, '#sc:' .. key, own - freed)
    redis.call('HSET', users, '#su:' .. key, rec.u)
    carried = true
  elseif freed > own then
    give_back(users, key, freed - own)
  end
  if n == 0 then
    redis.call('HDEL', users, '#s:' .. key)
    give_back(users, key, seats)
  else
    redis.call('HSET', users, '#s:' .. key, int_arg(n) .. ' ' .. int_arg(seats - freed))
  end
  -- (sessions - seats of the group moves by freed - 1)
  if freed ~= 1 and redis.call('HINCRBY', users, '#ssum', freed - 1) <= 0 then
    redis.call('HDEL', users, '#ssum')
  end
  return carried
end


-- Seats in use at `now`: the live leases, each weighted, a share group's as its seats.
-- (The shared leases beyond their groups' seats are left out less the expired leases not
-- yet reclaimed, any of which may be one of them: never fewer seats than are in use.)
local function in_use(k, now)
  local after = '(' .. int_arg(now)
  local used = redis.call('ZCOUNT', k.leases, after, '+inf')
    + redis.call('ZCOUNT', k.units, after, '+inf') + live_extra(k, now)
  local shared = shared_extra(k)
  if shared > 0 then
    shared = shared - redis.call('ZCOUNT', k.leases, '-inf', int_arg(now))
    if shared > 0 then used = used - shared end
  end
  return used
end

-- A license policy's live counts (the license's `users` hash, _policy.lua): a lease
-- counted for its user (rec.cu) or charged to a group's reservation (rec.cg) is taken
-- off that count when it ends, and a count that reaches 0 goes, so the hash holds only
-- users and groups with live leases. A lease without the marks costs nothing here.
local function uncount(users, rec, carried)
  if not users then return end
  -- cu, cg: the seats counted (a weighted lease counts its weight for its user, and
  -- its group is charged at most its weight); 1 in a record from before weights.
  -- `carried`: its user's count stays, carried by its share group (leave_share)
  if rec.cu and rec.u and not carried then
    if redis.call('HINCRBY', users, '#u:' .. rec.u, -rec.cu) <= 0 then
      redis.call('HDEL', users, '#u:' .. rec.u)
    end
  end
  if rec.cg and rec.g then
    if redis.call('HINCRBY', users, '#g:' .. rec.g, -rec.cg) <= 0 then
      redis.call('HDEL', users, '#g:' .. rec.g)
    end
  end
end

-- A lease's place in the license's counts goes: its share group's, its user's and
-- reservation group's (uncount; a user's count its share group carries stays).
local function leave_counts(users, rec)
  if not users then return end
  local carried = false
  if rec.sh then carried = leave_share(users, rec) end
  uncount(users, rec, carried)
end

-- What the service ended stays ended (docs/design.md, "A region lost"). A lease ended
-- while a token issued for it may still be valid is noted in the license's `ended` ZSET
-- until the last such token expires: no token brings it back (acquire.lua's
-- re-admission), and its heartbeat can say why (a revoke). A token's exp is at most the
-- deadline it was issued with, so the latest is the lease's current deadline
-- (`held_until`, when the caller read it; an expired lease's is past) or its record's
-- `te`: the latest deadline it was given before a call moved it down (move_deadline: a
-- shorter re-acquire, a term's cut, a conversion to a shorter borrow, a linger). The
-- member is the session id (24 characters: the service makes them), the score the note's
-- end in ms, plus 0.5 for a revoke or 0.25 for an idle reclaim (`revoked` = 'idle', or a
-- record cut for idleness, x = 3): a fixed size per note. Each note prunes the notes
-- whose tokens have all expired, and the key expires at most NOTES_KEPT_MS after its last
-- note's end (set again only when a note outlives it: about once that long, not on every
-- end): bounded with the reaper down. (A note of the release before, its end + 1000,
-- whole, reads alike.)
local NOTES_KEPT_MS = 3600000
local function note_end(k, sid, rec, now, held_until, revoked)
  if not k.ended then return end
  -- A lingering lease's deadline is the linger's, which no token says: its tokens' end
  -- was noted when its client released it (a revoke then only says it was a revoke).
  if rec.lg and not revoked then return end
  if rec.x == 3 and not revoked then revoked = 'idle' end
  local until_ms = math.max(rec.te or 0, rec.lg and 0 or (held_until or 0))
  if until_ms <= now and not rec.lg then return end
  redis.call('ZREMRANGEBYSCORE', k.ended, '-inf', int_arg(now))
  local old = tonumber(redis.call('ZSCORE', k.ended, sid))
  if old then until_ms = math.max(until_ms, math.floor(old)) end
  if until_ms <= now then return end
  local score = until_ms + ((revoked == 'idle' and 0.25) or (revoked and 0.5) or 0)
  if not old or score > old then redis.call('ZADD', k.ended, int_arg(score), sid) end
  local ttl = redis.call('PTTL', k.ended)
  if ttl < 0 or now + ttl <= until_ms then
    -- (past every note's end: one of the release before, which set no expiry, may end
    -- later than this one)
    local last = redis.call('ZRANGE', k.ended, '-1', '-1', 'WITHSCORES')
    local latest = math.max(until_ms, tonumber(last[2] or 0))
    redis.call('PEXPIREAT', k.ended, int_arg(math.floor(latest) + NOTES_KEPT_MS))
  end
end

-- Why the lease `sid` is noted as ended at `now`: 'revoked', 'idle', 'ended', or nil (no
-- note, or every token of it has expired).
local function ended_note(k, sid, now)
  local score = tonumber(redis.call('ZSCORE', k.ended, sid))
  if not score or score <= now then return nil end
  local part = score % 1
  if part == 0 then return 'ended' end
  if part < 0.4 then return 'idle' end
  return 'revoked'
end

-- Removes one lease from every structure that knows it (`k.users`: the license's policy
-- counts, see uncount; its weight, drop_weight), and notes its end while a token of it
-- may be valid (note_end: `now`, `held_until` its deadline when the caller read it,
-- `revoked` for an operator's revoke). Returns its record, or nil when the session was
-- unknown. `rec`: the lease's record when the caller has already read it (one HGET fewer).
local function drop_lease(k, lk, sid, rec, now, held_until, revoked)
  local raw = not rec and redis.call('HGET', k.sessions, sid)
  redis.call('ZREM', k.leases, sid)
  redis.call('HDEL', k.sessions, sid)
  redis.call('ZREM', k.deadlines, lk .. '|' .. sid)
  if not rec and not raw then return nil end
  rec = rec or cjson.decode(raw)
  if redis.call('HGET', k.clients, rec.c) == sid then
    redis.call('HDEL', k.clients, rec.c)
  end
  leave_counts(k.users, rec)
  drop_weight(k, sid, rec)
  if rec.iw and k.idlers then redis.call('ZREM', k.idlers, sid) end
  if now then note_end(k, sid, rec, now, held_until, revoked) end
  return rec
end

-- A lease's deadline moved to `deadline_text` in every index that holds it (the lease
-- set, the shard's deadline index); the caller stores the record (set_weight; `te`, the
-- latest deadline it had when this one is earlier than `old`, its deadline before: its
-- tokens may say so until then, note_end). `old`: a deadline a token was issued with
-- (nil when the lease was lingering: a linger's end is no token's).
local function move_deadline(k, lk, sid, rec, deadline_text, old)
  local new = tonumber(deadline_text)
  -- (a lingering lease's deadline is the linger's, which no token says: its te is the
  -- deadline it had when its client released it, set by release.lua)
  if rec.lg then
  elseif old and old > new then
    rec.te = math.max(rec.te or 0, old)
  elseif rec.te and new >= rec.te then
    rec.te = nil
  end
  redis.call('ZADD', k.leases, deadline_text, sid)
  redis.call('ZADD', k.deadlines, deadline_text, lk .. '|' .. sid)
  set_weight(k, sid, rec)
end

-- Stores lease `sid`: its deadline (move_deadline: both indexes, its tokens' end, its
-- weight) and its record `rec`. Every place a lease is written comes here. `old`: the
-- deadline it had (nil: a new lease). `changed` false: the caller changed nothing in the
-- record (a heartbeat's plain renewal), so it is written only if the move changed it.
local function put_lease(k, lk, sid, rec, deadline_text, old, changed)
  local ws, te = rec.ws, rec.te
  move_deadline(k, lk, sid, rec, deadline_text, old)
  if changed ~= false or ws ~= rec.ws or te ~= rec.te then
    redis.call('HSET', k.sessions, sid, cjson.encode(rec))
  end
end

-- Why a lease was cut short, in its record (x) and its end's event (metadata.reason):
-- 1, the license's end (+ grace) under end_leases; 2, the license has not started (its
-- start was moved later while the lease was held); 3, idle (_idle.lua).
local CUT_REASON = {'license_expired', 'license_not_started', 'idle'}

-- The term's limit on the license's held deadlines at `now` (T: load_terms), or nil for
-- none: {to, x}, every deadline past `to` is cut to it, marked x.
local function term_bound(T, now)
  if not T then return nil end
  if T.starts and now < T.starts then return {now, 2} end  -- not started: holds nothing
  if T.fin and not T.keep then return {T.fin, 1} end
  return nil
end

-- Cuts the license's held deadlines (leases, borrows, lingering leases) past the term's
-- bound to it, in the step that stores the term (cache_config.lua; cut_held.lua goes on
-- with a long one): the deadline index then ends them on time, whether or not their
-- clients call again. At most `limit` leases; returns how many were cut.
local function cut_held(k, lk, bound, limit)
  if not bound then return 0 end
  local text = int_arg(bound[1])
  local held = redis.call('ZRANGEBYSCORE', k.leases, '(' .. text, '+inf', 'WITHSCORES',
    'LIMIT', '0', int_arg(limit))
  for i = 1, #held, 2 do
    local sid = held[i]
    local raw = redis.call('HGET', k.sessions, sid)
    local rec = raw and cjson.decode(raw) or {}
    rec.x = bound[2]
    if raw then
      put_lease(k, lk, sid, rec, text, tonumber(held[i + 1]))
    else  -- (no record to keep: the deadline alone)
      move_deadline(k, lk, sid, rec, text, tonumber(held[i + 1]))
    end
  end
  return #held / 2
end

-- `meta` (a JSON object's text) with `field` ('"name":value') added last (ours wins over
-- a client's key of that name).
local function with_field(meta, field)
  if meta == nil or meta == '' or meta == '{}' then return '{' .. field .. '}' end
  return string.sub(meta, 1, -2) .. ',' .. field .. '}'
end

local function with_reason(meta, reason) return with_field(meta, '"reason":"' .. reason .. '"') end

-- The event of an expired lease's end (`rec`: its record, dropped): lease.reclaimed, or
-- lease.released for a lingering lease (its client did release it, and the seat it kept
-- for that client is free only now); `used` the seats in use after it.
local function emit_end(k, tenant, license, sid, rec, now, total, prefix, used)
  -- The config cache may have expired while the lease was held (heartbeats do not
  -- refresh it): fall back to the seat count recorded when the lease was taken.
  if total == '' or total == nil then total = rec.t or '' end
  local etype = 'lease.reclaimed'
  if rec.lg then etype = 'lease.released' end
  local meta = rec.m
  -- x: the deadline was cut by the license's term: the audit trail says why
  if rec.x and not rec.lg then meta = with_reason(meta, CUT_REASON[rec.x] or CUT_REASON[1]) end
  emit(k.outbox, prefix, now, {type = etype, tenant_id = tenant,
    license_id = license, session_id = sid, client_id = rec.c,
    seats_used = used, seats_total = tonumber(total), w = rec.w}, meta)
end

-- Ends the lease `sid` (its deadline has passed, or the term ended it: `held_until`, the
-- deadline it still had) with its event; returns its record (`rec`: the record as the
-- caller read it and marked it, nil to read it here).
local function reclaim(k, lk, tenant, license, sid, now, total, prefix, held_until, rec)
  rec = drop_lease(k, lk, sid, rec, now, held_until)
  if rec then emit_end(k, tenant, license, sid, rec, now, total, prefix, in_use(k, now)) end
  return rec
end

-- Reclaims at most `limit` expired leases of one license; returns how many. The seats in
-- use at `now` do not change as expired leases go, so one count serves every event.
local function reclaim_expired(k, lk, tenant, license, now, total, prefix, limit)
  local expired = redis.call('ZRANGEBYSCORE', k.leases, '-inf', int_arg(now), 'LIMIT', '0',
    int_arg(limit))
  if #expired == 0 then return 0 end
  local ended = {}
  for i, sid in ipairs(expired) do ended[i] = drop_lease(k, lk, sid, nil, now) or false end
  local used = in_use(k, now)
  for i, sid in ipairs(expired) do
    if ended[i] then emit_end(k, tenant, license, sid, ended[i], now, total, prefix, used) end
  end
  return #expired
end

-- The license's configuration from its cache hash, or nil when not cached.
-- Returns 'not_found' for a cached negative entry (license does not exist).
-- (HMGET of the known fields: cheaper than HGETALL plus a Lua loop.)
-- A cache entry written before borrowing and linger existed lacks their fields: off.
-- `policy` is the license policy's JSON text (_policy.lua), nil for a license without one;
-- `terms` is '1' for a license with a term, entitlements or a version range (load_terms).
-- `idle` its idle rule ('<timeout ms>|a' always, '|w' when needed: _idle.lua), `share` its
-- sharing rule ('<u|h|uh>|<sessions a seat, 0: any>': shared seats above); nil for none.
local function load_config(cfg_key)
  local v = redis.call('HMGET', cfg_key, 'exists', 'seats', 'lease_seconds',
    'max_lease_seconds', 'overage_percent', 'suspended', 'max_borrow_seconds',
    'linger_seconds', 'policy', 'terms', 'idle', 'share')
  if not v[1] then return nil end
  if v[1] ~= '1' then return 'not_found' end
  local seats = tonumber(v[2])
  return {seats = seats, lease_ms = tonumber(v[3]) * 1000, max_lease_ms = tonumber(v[4]) * 1000,
          limit = math.floor(seats * (100 + tonumber(v[5])) / 100), suspended = v[6],
          max_borrow_ms = (tonumber(v[7]) or 0) * 1000, linger_ms = (tonumber(v[8]) or 0) * 1000,
          policy = v[9] or nil, terms = v[10], idle = v[11] or nil, share = v[12] or nil}
end

-- The license's term, entitlements and version range from its cfg hash (written by
-- SeatEngine.cache_config only for a license that has some; docs/design.md, "Terms"):
--   starts  ms before which nothing is granted (nil: none)
--   exp     expires_at in ms; fin: exp + grace, when the license stops (nil: perpetual)
--   keep    true: on_expiry keep_leases (held leases live on after fin)
--   ent     ' a b ' (the names, space padded, for a plain find); entc the same 'a,b'
--   maxv    the highest version entitled ('' for any); maxk the same as comparable text
--           (seatlease.licenses.version_text: one string comparison decides)
-- `text` is the cfg's `terms` field, read with the rest of the configuration: all of them
-- as 'T|starts|exp|fin|keep|ent|entc|maxv|maxk' ('' for an absent one; seatlease.seats.
-- terms.terms_text), so no second HMGET; false for a license without terms (none of the
-- fields is cached then). A cache entry written before the text has '1' there and the
-- fields on their own: read as they always were.
local TERMS_TEXT = '^T|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'

local function load_terms(cfg_key, text)
  if not text then return {keep = false, ent = '', entc = '', maxv = ''} end
  local starts, exp, fin, keep, ent, entc, maxv, maxk = string.match(text, TERMS_TEXT)
  if starts then
    return {starts = tonumber(starts), exp = tonumber(exp), fin = tonumber(fin),
            keep = keep == '1', ent = ent, entc = entc, maxv = maxv,
            maxk = maxk ~= '' and maxk or nil}
  end
  local v = redis.call('HMGET', cfg_key, 'starts', 'exp', 'fin', 'keep', 'ent', 'entc',
    'maxv', 'maxk')
  return {starts = tonumber(v[1]), exp = tonumber(v[2]), fin = tonumber(v[3]),
          keep = v[4] == '1', ent = v[5] or '', entc = v[6] or '', maxv = v[7] or '',
          maxk = v[8]}
end

-- A weighted lease's reply (acquired, renewed, ok) ends in its weight, after the terms'
-- tail when there is one; a lease of weight 1 adds nothing (replies as before weights).
local function weighted_tail(reply, w)
  if w and w > 1 then reply[#reply + 1] = w end
  return reply
end

-- A borrowed lease's reply ends in the machine it was borrowed for ('m:<fingerprint>'),
-- when it was borrowed for one: the answer's token binds it to that machine, whichever
-- call asks (engine.py reads it off the end before the rest).
local function machine_tail(reply, fingerprint)
  if fingerprint then reply[#reply + 1] = 'm:' .. fingerprint end
  return reply
end

-- A lease's reply ends in its user as the license's policy judged it ('u:<user>'), when
-- it has one: the answer's token carries it, so that a re-admission by the token is
-- judged as that user's (acquire.lua). Last, after the machine's tail.
local function user_tail(reply, user)
  if user then reply[#reply + 1] = 'u:' .. user end
  return reply
end

-- Whether `client` holds a live lease of weight `w` (a renewal, however many seats the
-- license has now): read only to tell a renewal from a new lease asking too many.
local function holds_weight(k, client, w, now)
  local sid = redis.call('HGET', k.clients, client)
  if not sid then return false end
  local score = tonumber(redis.call('ZSCORE', k.leases, sid))
  if not score or score <= now then return false end
  local raw = redis.call('HGET', k.sessions, sid)
  return raw and (cjson.decode(raw).w or 1) == w or false
end

-- The reply's tail for a license with terms: expires_at and its end (0: none), flags
-- (1: in the grace, 2: the deadline was cut to the end), entitlements, max_version.
local function terms_tail(reply, T, now, cut)
  local flags = 0
  -- in the grace: past expires_at, before its end (after it, under keep_leases, no more)
  if T.exp and now >= T.exp and now < T.fin then flags = 1 end
  if cut then flags = flags + 2 end
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3] = T.exp or 0, T.fin or 0, flags
  reply[n + 4], reply[n + 5] = T.entc, T.maxv
  return reply
end

-- A failover's recovery window (seatlease/seats/failover.py; docs/design.md, "A region
-- lost"): while it lasts, the holders whose grants this Redis lost come back by their
-- lease tokens (acquire.lua's re-admission) and new grants wait. It lasts one heartbeat
-- interval of the longer of the license's default lease and the longest it granted
-- recently, and RECOVERY_SLACK_MS (the replication lag it assumes, and the call itself):
-- every holder whose lease was valid at the loss heartbeats within its interval. The
-- longest recent lease is noted with each grant in the license's `lmax` key ("<lease
-- ms>:<when noted>"), which expires RECENT_MS after the note (or the lease's own length,
-- when longer): a replica promoted in the primary's place knows it. (Never shorter than
-- the default's: after a loss of the data, one short grant must not close the window on
-- the holders of default leases; a longer lease re-admitted meanwhile lengthens it.)
local RECENT_MS = 3600000
local RECOVERY_SLACK_MS = 5000

local function note_lease_length(key, lease_ms, now)
  local v = redis.call('GET', key)
  if v then
    local longest, since = string.match(v, '^(%d+):(%d+)$')
    longest, since = tonumber(longest), tonumber(since)
    -- (the same length again is noted afresh twice an hour, not on every grant)
    if longest and (lease_ms < longest or (lease_ms == longest and now - since < RECENT_MS / 2))
    then return end
  end
  redis.call('SET', key, int_arg(lease_ms) .. ':' .. int_arg(now), 'PX',
    int_arg(math.max(lease_ms, RECENT_MS)))
end

-- The shard's mark (failover.py's mark_key): when this Redis's data of the shard began,
-- 'N<ms>', or began again after the service found it gone, 'L<ms>' (a recovery window
-- opened then). Returns that ms and true for a loss; nil without a mark (a shard no seat
-- call has filled a license's configuration in since the mark existed).
local function shard_mark(key)
  local v = redis.call('GET', key)
  if not v then return nil, false end
  return tonumber(string.sub(v, 2)), string.sub(v, 1, 1) == 'L'
end

-- The end (ms) of the recovery window open for the license at `now`, or nil. It began at
-- the later of the operator's failover (`operator_began`, sl:failover as the function
-- instance read it) and the shard's loss (`lost_at`), each nil for none.
local function recovery_ends(k, cfg, now, operator_began, lost_at)
  local began = math.max(operator_began or 0, lost_at or 0)
  if began == 0 then return nil end
  local longest = cfg.lease_ms
  local v = redis.call('GET', k.lmax)
  if v then longest = math.max(longest, tonumber(string.match(v, '^(%d+):')) or 0) end
  local ends = began + math.floor(longest / 3) + RECOVERY_SLACK_MS
  if now < ends then return ends end
  return nil
end
