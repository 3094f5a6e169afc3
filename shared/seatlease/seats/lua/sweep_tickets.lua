-- sweep_tickets.lua: the reaper's batch drop of lapsed wait-queue tickets in one shard,
-- found through the shard's ticket deadline index (O(log N + K), like leases), so an
-- abandoned queue empties without any traffic on its license. Each candidate's time is
-- checked again in its license's own index: a ticket renewed since the reaper read the
-- shard's is left alone, and one already dropped (by an acquire, or another run) skipped.
--
-- k.tix: the shard's ticket deadline index; k.outbox: the shard's events
-- k.candidates[i]: the i-th candidate's license's queue, tickets and tdl (ticket deadlines)
-- a.event_prefix: the events' id prefix
-- a.candidates[i]: the i-th candidate's tenant_id, license_id and client_id
--
-- Returns the number of tickets dropped (each with queue.left: ticket_expired, or
-- hold_expired when a seat was held for it and the hold ended first).
local tix, outbox, prefix = k.tix, k.outbox, a.event_prefix
local now = now_ms()
local dropped = 0
for i, c in ipairs(a.candidates) do
  local ck = k.candidates[i]
  local queue, tickets, tdl = ck.queue, ck.tickets, ck.tdl
  local tenant, license, client = c.tenant_id, c.license_id, c.client_id
  local member = tenant .. '/' .. license .. '|' .. client
  local ends = tonumber(redis.call('ZSCORE', tdl, client))
  if not ends then
    redis.call('ZREM', tix, member)  -- gone from its license already
  elseif ends <= now then
    local raw = redis.call('HGET', tickets, client)
    redis.call('ZREM', queue, client)
    redis.call('HDEL', tickets, client)
    redis.call('ZREM', tdl, client)
    redis.call('ZREM', tix, member)
    dropped = dropped + 1
    if raw then
      local t = cjson.decode(raw)
      local reason = 'ticket_expired'
      if t.o and ends < t.e then reason = 'hold_expired' end
      local fields = '"queued_ms":' .. int_arg(now - t.j) .. ',"reason":"' .. reason .. '"'
      local meta = ticket_meta(t, fields)
      emit(outbox, prefix, now, {type = 'queue.left', tenant_id = tenant,
        license_id = license, client_id = client}, meta)
    end
  else
    redis.call('ZADD', tix, int_arg(ends), member)  -- renewed: the index follows
  end
end
return dropped
