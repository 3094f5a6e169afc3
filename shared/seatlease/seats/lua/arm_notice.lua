-- arm_notice.lua: put a license with an end into its shard's notice index (notices.lua),
-- from SeatEngine.cache_config, whenever its configuration is cached. The same end as
-- before leaves the index as it is (the notices already sent are not due again); a new
-- one (a license update, a renewal) is due at once, and notices.lua works out which
-- notice, if any, that end calls for and when the next one is due.
--
-- k.notice: the license's notice hash; k.notices: the shard's notice index
-- a.license_key: "<tenant>/<license>"; a.expires_ms, a.grace_ms: its end and grace
--
-- Returns 1 when armed anew, 0 when the end had not changed.
local v = redis.call('HMGET', k.notice, 'exp', 'g')
if v[1] == a.expires_ms and v[2] == a.grace_ms then return 0 end
redis.call('HSET', k.notice, 'exp', a.expires_ms, 'g', a.grace_ms)
redis.call('ZADD', k.notices, 0, a.license_key)
return 1
