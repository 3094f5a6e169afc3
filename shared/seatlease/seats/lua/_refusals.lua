-- _refusals.lua: who was refused a seat, per license and minute (right-sizing, the sizing
-- report of docs/design.md): acquire.lua notes each refusal for want of seats and each
-- grant; flush_refusals.lua (the reaper) turns the notes into lease.refused events once a
-- minute's refused clients have had their true-denial window to come back.
--
-- Per license (k.refused, a HASH):
--   <client_id>  JSON {u = user as shown, e = entries}, an entry per minute the client was
--                refused in: {minute ms, refusals, seats asked (the largest), last refusal
--                ms, waiting (1: it held a place in the queue), granted at ms (0: not yet),
--                the second of the minute its wait began (0: the wait goes on from an
--                earlier entry, not granted since)}
--                A wait is one episode of demand: flush_refusals.lua judges it by its
--                length, not by where minutes fall (a wait across a boundary is served
--                in its first minute when granted less than 60 s after it began; in later
--                minutes only before the minute ended: it began before them).
--   #<minute>    the distinct clients kept for that minute (at most REFUSED_CAP)
--   +<minute>    refusals past the cap (or past a client's REFUSED_ENTRIES): counted, not
--                kept, so the minute's refused clients are a lower bound
-- Per license (k.refusing, a ZSET): each client -> its earliest minute not yet flushed,
--   and '#<minute>' -> minute (the minute's counters, flushed with it)
-- Per shard (k.refused_due, a ZSET): '<tenant>/<license>' -> the license's earliest
--   minute not yet flushed (the reaper reads the due ones: no SCAN)
--
-- Identifiers are A-Z a-z 0-9 . _ : @ - (keys.py): '#' and '+' never start a client id.
-- The user is cut to USER_NOTE_BYTES by the engine (seats/ids.py, shown_user): a note's
-- size is fixed whatever a caller's metadata holds.
-- A retry storm costs O(1) a call and no memory: a client's repeat in a minute is one
-- counter in its entry.
local REFUSED_CAP = 1000  -- distinct clients kept per license and minute
local REFUSED_ENTRIES = 64  -- a client's minutes kept until the reaper flushes them
-- With the reaper down nothing is judged, so nothing leaves: notes older than this go, a
-- few at each new note (drop_stale_refusals: bounded per call), and the keys expire this
-- long after the last refusal. The reaper judges a minute 12 minutes after it began.
local REFUSAL_KEEP_MS = 3600000
local STALE_DROPS = 10

local function drop_stale_refusals(k, now)
  local stale = redis.call('ZRANGEBYSCORE', k.refusing, '-inf',
    '(' .. int_arg(now - REFUSAL_KEEP_MS), 'LIMIT', '0', int_arg(STALE_DROPS))
  for _, member in ipairs(stale) do
    if string.sub(member, 1, 1) == '#' then
      redis.call('HDEL', k.refused, member, '+' .. string.sub(member, 2))
    else
      redis.call('HDEL', k.refused, member)
    end
    redis.call('ZREM', k.refusing, member)
  end
end

-- The keys a new note wrote expire REFUSAL_KEEP_MS after it (after its writes: a key
-- made by them has no expiry before).
local function keep_refusals(k)
  local keep = int_arg(REFUSAL_KEEP_MS)
  redis.call('PEXPIRE', k.refused, keep)
  redis.call('PEXPIRE', k.refusing, keep)
  redis.call('PEXPIRE', k.refused_due, keep)
end

-- A refusal of `client` (asking `w` seats) at `now`; `waiting`: it holds a place in line.
local function note_refusal(k, lk, client, user, w, now, waiting)
  local minute = now - now % 60000
  local mtext = int_arg(minute)
  local raw = redis.call('HGET', k.refused, client)
  local rec = raw and cjson.decode(raw) or nil
  local e = rec and rec.e[#rec.e] or nil
  if e == nil or e[1] ~= minute then
    drop_stale_refusals(k, now)
    local kept = tonumber(redis.call('HGET', k.refused, '#' .. mtext) or 0)
    if redis.call('ZADD', k.refusing, 'NX', mtext, '#' .. mtext) == 1 then
      redis.call('ZADD', k.refused_due, 'NX', mtext, lk)
    end
    if kept >= REFUSED_CAP or (rec and #rec.e >= REFUSED_ENTRIES) then
      redis.call('HINCRBY', k.refused, '+' .. mtext, 1)
      keep_refusals(k)
      return
    end
    redis.call('HINCRBY', k.refused, '#' .. mtext, 1)
    rec = rec or {e = {}}
    local began = math.floor((now - minute) / 1000)  -- a new wait (to the second, down)
    if e and e[6] == 0 then began = 0 end  -- an earlier minute's wait going on
    e = {minute, 0, w, now, 0, 0, began}
    rec.e[#rec.e + 1] = e
    redis.call('ZADD', k.refusing, 'NX', mtext, client)
  end
  e[2] = e[2] + 1
  if w > e[3] then e[3] = w end
  e[4] = now
  if waiting then e[5] = 1 end
  if user ~= '' then rec.u = user end
  redis.call('HSET', k.refused, client, cjson.encode(rec))
  if e[2] == 1 then keep_refusals(k) end  -- (a new entry: a retry's count changes none)
end

-- A seat granted to `client` at `now`: its refusals not yet flushed were served then.
local function note_grant(k, client, now)
  local raw = redis.call('HGET', k.refused, client)
  if not raw then return end
  local rec = cjson.decode(raw)
  local changed = false
  for _, e in ipairs(rec.e) do
    if e[6] == 0 then e[6], changed = now, true end
  end
  if changed then redis.call('HSET', k.refused, client, cjson.encode(rec)) end
end
