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
-- KEYS[1] cfg   KEYS[2] queue   KEYS[3] tickets   KEYS[4] ticket deadlines (the license's)
-- KEYS[5] the shard's ticket deadline index   KEYS[6] outbox (shard)
-- KEYS[7] leases   KEYS[8] sessions   KEYS[9] deadlines (shard)   KEYS[10] units
-- KEYS[11] wsum
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] TTL in seconds
-- ARGV[4] '' to keep the queue, else the reason its tickets leave ('queue_off',
--   'license_gone')   ARGV[5] event id prefix   ARGV[6...] the cfg hash's fields and
--   values, alternating (a policy's users may be many: written in chunks, never one
--   unpack of them all)
--
-- Returns {tickets that left, leases cut}.
local cfg, queue, tickets, tdl, tix, outbox = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5],
  KEYS[6]
local tenant, license, ttl, reason, prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local CHUNK = 1000  -- field/value pairs a command
local CUT_CHUNK = 1000  -- held leases cut a call

redis.call('DEL', cfg)
local pairs_n = (#ARGV - 5) / 2
for i = 1, pairs_n, CHUNK do
  local args = {}
  for j = i, math.min(i + CHUNK - 1, pairs_n) do
    args[#args + 1] = ARGV[4 + 2 * j]
    args[#args + 1] = ARGV[5 + 2 * j]
  end
  redis.call('HSET', cfg, unpack(args))
end
redis.call('EXPIRE', cfg, ttl)

local now = now_ms()
local lk = tenant .. '/' .. license
local cut = 0
local config = load_config(cfg)
if type(config) == 'table' and config.terms then
  local k = {leases = KEYS[7], sessions = KEYS[8], deadlines = KEYS[9], units = KEYS[10],
             wsum = KEYS[11]}
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
