-- notices.lua: the reaper's term notices for the due licenses of one shard:
-- license.expiring at each threshold before expires_at (30, 7 and 1 days by default:
-- LICENSE_NOTICE_DAYS) and license.expired when the grace ends, each sent once per end.
--
-- The shard's notice index (k.notices) holds "<tenant>/<license>" -> when its next notice
-- is due; the reaper reads the due members (ZRANGEBYSCORE -inf now: O(log N + K)) and
-- hands them here. A license's notice hash holds its end (exp, g: written by
-- arm_notice.lua) and what was sent for it (term: "exp:g" it was sent for, sent: how many
-- of its points have passed). The points are expires_at - each threshold, in time order,
-- then expires_at + grace. Of the points passed and not yet sent only the latest is sent
-- (a license created 3 days before its end gets one "expiring" notice, not three), then
-- the license is due again at its next point, or leaves the index after the last. The
-- event and the state that says it was sent change in this one script: exactly once,
-- whatever runs or restarts of the reaper come between.
--
-- k.notices: the shard's notice index; k.outbox: the shard's events
-- k.notice_hashes[i]: the notice hash of the i-th license
-- a.event_prefix: the events' id prefix; a.thresholds: in ms, largest first, comma separated
-- a.licenses[i]: the i-th license, "<tenant>/<license>"
--
-- Returns the number of notices emitted.
local index, outbox, prefix = k.notices, k.outbox, a.event_prefix
local now = now_ms()
local thresholds = {}
for t in string.gmatch(a.thresholds, '%d+') do thresholds[#thresholds + 1] = tonumber(t) end
local sent_total = 0
for i, member in ipairs(a.licenses) do
  local key = k.notice_hashes[i]
  local score = tonumber(redis.call('ZSCORE', index, member))
  local v = redis.call('HMGET', key, 'exp', 'g', 'term', 'sent')
  if score and score <= now then
    if not v[1] then
      redis.call('ZREM', index, member)  -- no end any more
    else
      local exp, grace = tonumber(v[1]), tonumber(v[2]) or 0
      local term = v[1] .. ':' .. (v[2] or '0')
      local sent = 0
      if v[3] == term then sent = tonumber(v[4]) or 0 end
      local points = {}
      for j, t in ipairs(thresholds) do points[j] = exp - t end
      points[#points + 1] = exp + grace
      local due = 0
      for j, p in ipairs(points) do if p <= now then due = j end end
      if due > sent then
        local slash = string.find(member, '/', 1, true)
        local meta = '{"expires_at":"' .. rfc3339(exp) .. '","grace_ends_at":"'
          .. rfc3339(exp + grace) .. '"'
        local etype = 'license.expired'
        if due <= #thresholds then
          etype = 'license.expiring'
          local d = thresholds[due] / 86400000
          if d % 1 == 0 then d = int_arg(d) else d = string.format('%.6g', d) end
          meta = meta .. ',"threshold_days":' .. d
        end
        emit(outbox, prefix, now, {type = etype, tenant_id = string.sub(member, 1, slash - 1),
          license_id = string.sub(member, slash + 1)}, meta .. '}')
        redis.call('HSET', key, 'term', term, 'sent', due)
        sent, sent_total = due, sent_total + 1
      end
      if sent >= #points then
        redis.call('ZREM', index, member)
      else
        redis.call('ZADD', index, int_arg(points[sent + 1]), member)
      end
    end
  end
end
return sent_total
