-- cut_held.lua: go on cutting a license's held deadlines to its term, CUT_CHUNK leases a
-- call, after cache_config.lua stored the term and cut the first chunk (_lib.lua's
-- cut_held). The term is read from the cached configuration, so a call made after a
-- newer change cuts to that one; nothing to cut (no term, keep_leases, none past it):
-- nothing done.
--
-- KEYS[1] cfg   KEYS[2] leases   KEYS[3] sessions   KEYS[4] deadlines (shard)   KEYS[5] units
-- KEYS[6] wsum
-- ARGV[1] tenant_id   ARGV[2] license_id   ARGV[3] the most leases to cut
--
-- Returns the number of leases cut.
local config = load_config(KEYS[1])
if type(config) ~= 'table' or not config.terms then return 0 end
local k = {leases = KEYS[2], sessions = KEYS[3], deadlines = KEYS[4], units = KEYS[5],
           wsum = KEYS[6]}
return cut_held(k, ARGV[1] .. '/' .. ARGV[2],
  term_bound(load_terms(KEYS[1], config.terms), now_ms()), tonumber(ARGV[3]))
