-- _idle.lua: idle seats (docs/design.md, "Idle seats"), for heartbeat.lua and acquire.lua.
-- scripts.py puts it after _lib.lua.
--
-- A license's idle rule (cfg 'idle', load_config's cfg.idle): '<timeout ms>|a' (reclaim
-- always) or '<timeout ms>|w' (when needed). A heartbeat may say how long the product saw
-- no user activity (a.idle_seconds, '' for not said: active) and that it is busy
-- (a.busy '1': never idle). A lease idle at least the timeout, not busy and not borrowed
-- is *warned*: its record gets iw, when it is reclaimed (no earlier than one heartbeat
-- interval from the warning: a third of its lease, at least a second), the license's
-- `idlers` ZSET the same, and lease.idle is told; its heartbeats' answers carry iw until
-- a heartbeat that is not idle clears it (lease.active). Under 'always' the warned lease's
-- deadline is cut to iw (x = 3): the deadline index ends it then, reason idle, whoever
-- calls. Under 'when needed' it heartbeats on; an acquire that finds no seat reclaims the
-- warned leases whose time has come (_acquire.lua's make_room).

-- The idle rule's timeout (ms) and whether it reclaims always; nil for none.
local function idle_rule(text)
  if not text then return nil end
  local ms, mode = string.match(text, '^(%d+)|(%a)$')
  if not ms then return nil end
  return tonumber(ms), mode == 'a'
end

-- The event of a warning given (lease.idle) or taken back (lease.active).
local function idle_event(k, a, sid, rec, now, etype, fields)
  local meta = rec.m
  if fields then meta = with_field(meta, fields) end
  emit(k.outbox, a.event_prefix, now, {type = etype, tenant_id = a.tenant_id,
    license_id = a.license_id, session_id = sid, client_id = rec.c, w = rec.w}, meta)
end

-- A heartbeat's word on the lease's activity (`rule`: the cfg's idle field, nil for
-- none; `said`: the idle seconds it said, '' for none; `busy`: '1' for busy): returns when the warned lease is reclaimed (nil: not warned), whether the
-- record changed, and whether its deadline is cut to that time ('always').
local function idle_heartbeat(k, a, sid, rec, rule, now, said, busy)
  local timeout, always = idle_rule(rule)
  said = tonumber(said or '')
  if timeout and said and busy ~= '1' and said * 1000 >= timeout then
    if rec.iw then return rec.iw, false, always end
    rec.iw = now + math.max(1000, math.floor(rec.l / 3000) * 1000)
    redis.call('ZADD', k.idlers, int_arg(rec.iw), sid)
    idle_event(k, a, sid, rec, now, 'lease.idle', '"idle_seconds":' .. int_arg(said)
      .. ',"idle_reclaim_at":"' .. rfc3339(rec.iw) .. '"')
    return rec.iw, true, always
  end
  if rec.iw then  -- active again, busy, or the rule is gone: the warning is taken back
    rec.iw = nil
    redis.call('ZREM', k.idlers, sid)
    idle_event(k, a, sid, rec, now, 'lease.active')
    return nil, true, false
  end
  return nil, false, false
end
