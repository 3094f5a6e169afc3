-- cache_config.lua: replace a license's cached configuration in one atomic step, so a
-- seat call never finds it half written (missing, then 404); when the license has
-- no queue (any more, or no longer exists), end every waiting ticket's wait with
-- queue.left saying why, as every other end of a wait does; and cut the held deadlines
-- to what the license's term allows (_lib.lua's cut_held: under end_leases none past
-- the end + grace, and none at all before its start), the first CUT_CHUNK of them in
-- this same step: a term set, shortened or moved is kept by the deadlines themselves
-- (the reaper ends them on time), not by the clients' next calls. The engine goes on
-- with cut_held.lua while a chunk comes back full (any call of the license meanwhile
-- reads the new term and cuts its own lease).
--
-- k.cfg: the license's configuration; k.queue, k.tickets, k.tdl (ticket deadlines): its
--   wait queue; k.tix: the shard's ticket deadline index; k.outbox: the shard's events
-- k.leases, k.sessions, k.units, k.wsum: the license's leases; k.deadlines: the shard's
-- a.tenant_id, a.license_id; a.ttl_seconds: the cached configuration's TTL
-- a.queue_reason: '' to keep the queue, else the reason its tickets leave ('queue_off',
--   'license_gone'); a.event_prefix: the events' id prefix
-- a.fields: the cfg hash's fields, each {field, value} (a policy's users may be many:
--   written in chunks, never one unpack of them all)
--
-- Returns {tickets that left, leases cut}.
local cfg, queue, tickets, tdl, tix, outbox = k.cfg, k.queue, k.tickets, k.tdl, k.tix,
  k.outbox
local tenant, license, ttl, reason = a.tenant_id, a.license_id, a.ttl_seconds, a.queue_reason
local prefix = a.event_prefix
local CHUNK = 1000  -- field/value pairs a command
local CUT_CHUNK = 1000  -- held leases cut a call

redis.call('DEL', cfg)
local fields = a.fields
for i = 1, #fields, CHUNK do
  local args = {}
  for j = i, math.min(i + CHUNK - 1, #fields) do
    args[#args + 1] = fields[j].field
    args[#args + 1] = fields[j].value
  end
  redis.call('HSET', cfg, unpack(args))
end
redis.call('EXPIRE', cfg, ttl)

local now = now_ms()
local lk = tenant .. '/' .. license
local cut = 0
local config = load_config(cfg)
if type(config) == 'table' and config.terms then
  cut = cut_held(k, lk, term_bound(load_terms(cfg, config.terms), now), CUT_CHUNK)
end

if reason == '' then return {0, cut} end
local waiting = redis.call('ZRANGE', queue, 0, -1)
if #waiting == 0 then return {0, cut} end
for _, client in ipairs(waiting) do
  local raw = redis.call('HGET', tickets, client)
  if raw then
    local t = cjson.decode(raw)
    local fields = '"queued_ms":' .. int_arg(now - t.j) .. ',"reason":"' .. reason .. '"'
    local meta = ticket_meta(t, fields)
    emit(outbox, prefix, now, {type = 'queue.left', tenant_id = tenant, license_id = license,
      client_id = client}, meta)
  end
  redis.call('ZREM', tix, lk .. '|' .. client)
end
redis.call('DEL', queue, tickets, tdl)
return {#waiting, cut}
