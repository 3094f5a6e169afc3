-- readmit.lua: re-create a lease this Redis does not know from its signed lease token,
-- after a region's loss (docs/design.md, "A region lost"): the replica promoted in its
-- place missed the last writes, and a client whose grant was lost still holds a valid
-- token. The token was verified by the caller (signature, audience, session, expiry); this
-- script decides, against the Redis clock and the license as it is now, whether its seat
-- comes back, and re-creates the lease with its session id, client, weight and machine,
-- its deadline the token's `exp` (cut to the license's term). One event, lease.recovered.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] clients   KEYS[5] deadlines
-- (shard)   KEYS[6] outbox (shard)   KEYS[7] units   KEYS[8] wsum   KEYS[9] the shard's
-- count of re-admissions (`seatlease failover status` sums them)   KEYS[10] ended (the
-- leases released or revoked before their tokens expire: release.lua)
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] session_id   ARGV[4] client_id
-- ARGV[5] the weight (the token's seats, 1 without)   ARGV[6] the token's exp (ms)
-- ARGV[7] 1 for a borrowed lease   ARGV[8] the machine (cnf.machine, '' for none)
-- ARGV[9] event id prefix
--
-- Returns one of
--   {'recovered', deadline_ms}   re-created (a borrow beyond the cap too: its token was
--                                valid offline all along, so it counts from now on)
--   {'known'}                    the session is live here: nothing to recover
--   {'superseded'}               its client holds another live lease here (it acquired
--                                again meanwhile): the token's seat is not given twice
--   {'expired'}                  the token's exp has passed on the Redis clock
--   {'ended'}                    the lease was released or revoked here: its tokens are
--                                void (an operator's revoke is never undone by one)
--   {'full', used, limit}        a lease's seat would pass the cap: refused (never over)
--   {'license_expired', expires_ms, end_ms} | {'not_started', starts_ms}
--   {'missing'} | {'not_found'}
local k = {cfg = KEYS[1], leases = KEYS[2], sessions = KEYS[3], clients = KEYS[4],
           deadlines = KEYS[5], outbox = KEYS[6], units = KEYS[7], wsum = KEYS[8]}
local tenant, license, sid, client = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local w, exp, borrowed, machine, prefix = tonumber(ARGV[5]), tonumber(ARGV[6]),
  ARGV[7] == '1', ARGV[8], ARGV[9]
local lk = tenant .. '/' .. license

local cfg = load_config(k.cfg)
if cfg == nil then return {'missing'} end
if cfg == 'not_found' then return {'not_found'} end
local now = now_ms()
local score = tonumber(redis.call('ZSCORE', k.leases, sid))
if score and score > now then return {'known'} end
if exp <= now then return {'expired'} end
local ended = tonumber(redis.call('ZSCORE', KEYS[10], sid))
if ended and ended > now then return {'ended'} end
local held = redis.call('HGET', k.clients, client)
if held and held ~= sid then
  local other = tonumber(redis.call('ZSCORE', k.leases, held))
  if other and other > now then return {'superseded'} end
end
local T = cfg.terms and load_terms(k.cfg, cfg.terms) or nil
if T and T.starts and now < T.starts then return {'not_started', T.starts} end
if T and T.fin and not T.keep and now >= T.fin then
  return {'license_expired', T.exp, T.fin}
end
-- an expired record of the same session (or of the client's earlier one) goes first
if score then reclaim(k, lk, tenant, license, sid, now, cfg.seats, prefix) end
if held and held ~= sid then reclaim(k, lk, tenant, license, held, now, cfg.seats, prefix) end
local used = in_use(k, now)
if not borrowed and used + w > cfg.limit then return {'full', used, cfg.limit} end

local deadline = exp
local rec = {c = client, a = now, l = cfg.lease_ms, m = '{"recovered":true}', t = cfg.seats}
if w > 1 then rec.w = w end
if borrowed then
  rec.b, rec.l = 1, exp - now
  if machine ~= '' then rec.f = machine end
end
local bound = term_bound(T, now)
if bound and deadline > bound[1] then deadline, rec.x = bound[1], bound[2] end
if T then rec.tm = 1 end
add_weight(k, rec, w)
local text = int_arg(deadline)
redis.call('ZADD', k.leases, text, sid)
redis.call('HSET', k.sessions, sid, cjson.encode(rec))
redis.call('HSET', k.clients, client, sid)
redis.call('ZADD', k.deadlines, text, lk .. '|' .. sid)
redis.call('INCR', KEYS[9])
emit(k.outbox, prefix, now, {type = 'lease.recovered', tenant_id = tenant, license_id = license,
  session_id = sid, client_id = client, seats_used = used + w, seats_total = cfg.seats, w = w},
  '{"reason":"failover"}')
return {'recovered', deadline}
