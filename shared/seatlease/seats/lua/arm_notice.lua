-- arm_notice.lua: put a license with an end into its shard's notice index (notices.lua),
-- from SeatEngine.cache_config, whenever its configuration is cached. The same end as
-- before leaves the index as it is (the notices already sent are not due again); a new
-- one (a license update, a renewal) is due at once, and notices.lua works out which
-- notice, if any, that end calls for and when the next one is due.
--
-- KEYS[1] the license's notice hash   KEYS[2] notices (shard)
-- ARGV[1] "<tenant>/<license>"   ARGV[2] expires_at (ms)   ARGV[3] grace (ms)
--
-- Returns 1 when armed anew, 0 when the end had not changed.
local v = redis.call('HMGET', KEYS[1], 'exp', 'g')
if v[1] == ARGV[2] and v[2] == ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'exp', ARGV[2], 'g', ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
