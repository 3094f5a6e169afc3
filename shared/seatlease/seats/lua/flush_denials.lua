-- flush_denials.lua: turn a shard's denial counters into lease.denied events, atomically
-- (a denial counted while this runs lands in the next flush, never in neither).
--
-- k.denials, k.outbox: the shard's denial counters and events; a.event_prefix: the
-- events' id prefix
--
-- Returns the number of denials flushed.
local flat = redis.call('HGETALL', k.denials)
local now = now_ms()
local total = 0
for i = 1, #flat, 2 do
  local lk, count = flat[i], flat[i + 1]
  local slash = string.find(lk, '/', 1, true)
  emit(k.outbox, a.event_prefix, now, {type = 'lease.denied',
    tenant_id = string.sub(lk, 1, slash - 1), license_id = string.sub(lk, slash + 1),
    count = tonumber(count)})
  total = total + tonumber(count)
end
redis.call('DEL', k.denials)
return total
