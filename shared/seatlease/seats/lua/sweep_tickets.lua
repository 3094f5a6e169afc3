-- sweep_tickets.lua: the reaper's batch drop of lapsed wait-queue tickets in one shard,
-- found through the shard's ticket deadline index (O(log N + K), like leases), so an
-- abandoned queue empties without any traffic on its license. Each candidate's time is
-- checked again in its license's own index: a ticket renewed since the reaper read the
-- shard's is left alone, and one already dropped (by an acquire, or another run) skipped.
--
-- KEYS[1] the shard's ticket deadline index   KEYS[2] outbox (shard)
-- then three keys per candidate i (base = 2 + 3 * (i - 1)):
--   KEYS[base+1] queue   KEYS[base+2] tickets   KEYS[base+3] ticket deadlines (license's)
-- ARGV[1] event id prefix, then three per candidate: tenant_id, license_id, client_id
--
-- Returns the number of tickets dropped (each with queue.left: ticket_expired, or
-- hold_expired when a seat was held for it and the hold ended first).
local tix, outbox, prefix = KEYS[1], KEYS[2], ARGV[1]
local now = now_ms()
local dropped = 0
local n = (#ARGV - 1) / 3
for i = 1, n do
  local base = 2 + 3 * (i - 1)
  local queue, tickets, tdl = KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  local tenant, license, client = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
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
