-- flush_refusals.lua: turn the refusals noted by acquire.lua (_refusals.lua) into
-- lease.refused events, a minute at a time, once the minute's clients have had the
-- true-denial window to be granted (the reaper calls it for the shard's due licenses).
--
-- k.refused_due: the shard's refused-due index; k.outbox: the shard's events
-- k.licenses[i]: the i-th license's refused (HASH) and refusing (ZSET)
-- a.event_prefix: the events' id prefix; a.window_ms: the true-denial window
-- a.budget: at most this many client-minutes judged by this call
-- a.licenses[i]: the i-th license as '<tenant>/<license>'
--
-- A minute m is due when m + 60 s + the window has passed. For each client refused in it:
--   served       granted within the minute (before m + 60 s), or less than 60 s after its
--                wait began (_refusals.lua's seventh field): a wait across a minute
--                boundary is one episode, judged by its length as inside one minute
--   true_denial  not granted within the window after its last refusal in m, and not
--                refused again within that window either (a client that keeps trying is
--                one episode: it is judged at its last minute, so one give-up is one
--                true denial)
--   waiting      it held a place in the license's queue
-- one event per client and minute: client_id, seats (the most it asked), count (its
-- refusals), metadata {minute, user, served, true_denial, waiting}; and, for a minute
-- past REFUSED_CAP, one event without client_id: count = the refusals not kept,
-- metadata {minute, lower_bound = true}.
--
-- Returns {judged, more}: more = 1 when a license still has due minutes (call again).
local now = now_ms()
local window = tonumber(a.window_ms)
local budget = tonumber(a.budget)
local cutoff = now - 60000 - window
local judged, more = 0, 0
local prefix = a.event_prefix

local function flag(v) if v then return 'true' else return 'false' end end

for i, lk in ipairs(a.licenses) do
  local lic = k.licenses[i]
  local slash = string.find(lk, '/', 1, true)
  local tenant, license = string.sub(lk, 1, slash - 1), string.sub(lk, slash + 1)
  local due = {}
  if judged < budget then
    due = redis.call('ZRANGEBYSCORE', lic.refusing, '-inf', int_arg(cutoff), 'LIMIT', '0',
      int_arg(budget - judged))
  end
  for _, member in ipairs(due) do
    if string.sub(member, 1, 1) == '#' then
      local mtext = string.sub(member, 2)
      local over = tonumber(redis.call('HGET', lic.refused, '+' .. mtext) or 0)
      if over > 0 then
        emit(k.outbox, prefix, now, {type = 'lease.refused', tenant_id = tenant,
          license_id = license, count = over},
          '{"minute":"' .. rfc3339(tonumber(mtext)) .. '","lower_bound":true}')
      end
      redis.call('HDEL', lic.refused, member, '+' .. mtext)
      redis.call('ZREM', lic.refusing, member)
    else
      local raw = redis.call('HGET', lic.refused, member)
      local rec = raw and cjson.decode(raw) or {e = {}}
      local keep = {}
      for j, e in ipairs(rec.e) do
        if e[1] <= cutoff then
          local granted = e[6]
          local began = e[1] + (e[7] or 0) * 1000  -- (no 7th: a note from before it)
          local served = granted > 0 and granted < began + 60000
          local gave_up = not (granted > 0 and granted <= e[4] + window)
          if gave_up then
            local again = rec.e[j + 1]  -- entries are in minute order
            if again and again[1] <= e[4] + window then gave_up = false end
          end
          local meta = {minute = rfc3339(e[1]), served = served, true_denial = gave_up,
            waiting = e[5] == 1}
          if rec.u then meta.user = rec.u end
          emit(k.outbox, prefix, now, {type = 'lease.refused', tenant_id = tenant,
            license_id = license, client_id = member, count = e[2], w = e[3]},
            cjson.encode(meta))
          judged = judged + 1
        else
          keep[#keep + 1] = e
        end
      end
      if #keep == 0 then
        redis.call('HDEL', lic.refused, member)
        redis.call('ZREM', lic.refusing, member)
      else
        rec.e = keep
        redis.call('HSET', lic.refused, member, cjson.encode(rec))
        redis.call('ZADD', lic.refusing, int_arg(keep[1][1]), member)
      end
    end
  end
  -- the license's place in the shard's index: its earliest minute left, or none
  local first = redis.call('ZRANGE', lic.refusing, '0', '0', 'WITHSCORES')
  if #first == 0 then
    redis.call('ZREM', k.refused_due, lk)
  else
    redis.call('ZADD', k.refused_due, first[2], lk)
    if tonumber(first[2]) <= cutoff then more = 1 end
  end
end
return {judged, more}
