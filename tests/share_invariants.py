"""What the seat models check of idle and shared seats, in one place
(tests/test_engine_promises_model.py, tests/test_engine_idle_share_model.py): the engine's
count beside the ground truth counting a share group's seats once, and the share groups'
and idle warnings' bookkeeping against the lease records."""

from __future__ import annotations

import json
from typing import Any

from seatlease.seats.keys import LicenseKeys
from seatlease.seats.scripts import helpers_source

# The engine's count (in_use) beside the ground truth: a shared seat once (its group's
# seats), every other lease its weight; and how many expired leases wait for the reaper
# (while any do, the engine may count more, never fewer).
TRUTH = (
    helpers_source()
    + """
local now = now_ms()
local k = {leases = KEYS[1], sessions = KEYS[2], units = KEYS[3], wsum = KEYS[4],
           users = KEYS[5]}
local truth, groups = 0, {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', k.leases, '(' .. int_arg(now), '+inf')) do
  local raw = redis.call('HGET', k.sessions, sid)
  local rec = raw and cjson.decode(raw) or {}
  if rec.sh then
    if not groups[rec.sh] then
      groups[rec.sh] = true
      local _, seats = share_group(k.users, rec.sh)
      truth = truth + seats
    end
  else
    truth = truth + (rec.w or 1)
  end
end
return {in_use(k, now), truth, now, redis.call('ZCOUNT', k.leases, '-inf', int_arg(now))}
"""
)


def truth_keys(k: LicenseKeys) -> list[str]:
    return [k.leases, k.sessions, k.units, k.wsum, k.users]


def check_shares(redis: Any, k: LicenseKeys, now: int, idle_ended: set[str]) -> dict:
    """Each share group's sessions are the leases stored in it; its seats at least one and
    at most its sessions; the sum the seat count leaves out is theirs; no lease of more
    than one seat shares (a new borrow never does; a shared lease converted to a borrow
    keeps its group's seat); a borrow is never warned; a lease reclaimed for being idle is
    never live again. Returns the groups ({key: (sessions, seats)})."""
    members: dict[str, int] = {}
    for raw in redis.hvals(k.sessions):
        rec = json.loads(raw)
        if rec.get("sh"):
            members[rec["sh"]] = members.get(rec["sh"], 0) + 1
            assert rec.get("w", 1) == 1, rec
        assert not (rec.get("b") and rec.get("iw")), "a borrow warned idle"
    counted = redis.hgetall(k.users)
    groups = {f[3:]: tuple(map(int, v.split())) for f, v in counted.items() if f[:3] == "#s:"}
    assert {g: n for g, (n, _) in groups.items()} == members, (groups, members)
    for n, seats in groups.values():
        assert 1 <= seats <= n, groups
    beyond = sum(n - seats for n, seats in groups.values())
    assert int(counted.get("#ssum", 0)) == beyond, (counted.get("#ssum"), groups)
    live = {sid for sid, d in redis.zrange(k.leases, 0, -1, withscores=True) if d > now}
    assert not (live & idle_ended), "an idle-reclaimed lease lives again"
    return groups
