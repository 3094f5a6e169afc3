-- cut_held.lua: go on cutting a license's held deadlines to its term, CUT_CHUNK leases a
-- call, after cache_config.lua stored the term and cut the first chunk (_lib.lua's
-- cut_held). The term is read from the cached configuration, so a call made after a
-- newer change cuts to that one; nothing to cut (no term, keep_leases, none past it):
-- nothing done.
--
-- k.cfg, k.leases, k.sessions, k.units, k.wsum: the license's; k.deadlines: the shard's
-- a.tenant_id, a.license_id; a.limit: the most leases to cut
--
-- Returns the number of leases cut.
local config = load_config(k.cfg)
if type(config) ~= 'table' or not config.terms then return 0 end
return cut_held(k, a.tenant_id .. '/' .. a.license_id,
  term_bound(load_terms(k.cfg, config.terms), now_ms()), tonumber(a.limit))
