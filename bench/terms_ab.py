"""A weighted lease on a license with terms against a plain one, this revision against an
older one, interleaved.

``bench/redis_cost.py`` measures its terms row (``acquire (terms+w4)``) in its own batch,
so on a shared machine the load of the moment lands on one phase and not the other. This
runs four variants in the same redis-server, in small batches, rotating their order
every round, so every variant sees the same load:

- ``plain (old)`` / ``plain (new)``: a new lease on a license without terms (weight 1);
- ``terms+w4 (old)`` / ``terms+w4 (new)``: a new lease of weight 4 on redis_cost.py's
  license with terms (an end a year away, a 7-day grace, 8 entitlements, a max_version),
  asking for two entitlements and its version,

"old" being acquire.lua (with its preludes) of ``--old-rev`` (default e460b18, the commit
weighted seats landed in) and "new" this tree's, each on licenses it filled itself
(``--leases`` leases each, weighted as its own calls). Per batch, the server's own time
per call (``INFO commandstats``, ``usec_per_call`` of ``evalsha`` after ``CONFIG
RESETSTAT``); the medians of the per-round ratios over ``--rounds`` rounds are printed,
with the least disturbed estimate (minimum batch over minimum batch). Every reply is
checked to be an ``acquired`` of the weight asked.

Run: ``python3 bench/terms_ab.py`` (about a minute; a git checkout is needed to read the
old scripts).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from interleaved import META, PIPELINE, TENANT, interleave, report

from seatlease.licenses import LicenseConfig
from seatlease.seats.ids import new_request_id, new_session_id
from seatlease.seats.protocol.calls import acquire_call
from seatlease.seats.protocol.replies import decode

# as bench/redis_cost.py's terms license and its calls
ENTITLEMENTS = ("cloud", "design", "pro", "render", "render.gpu", "sim", "team", "viewer")
NEEDS = ("pro", "render")
VERSION = "2026.4"
WEIGHT = 4
TERM_ENDS = datetime.now(UTC) + timedelta(days=365)


def config(license_id: str) -> LicenseConfig:
    plain = LicenseConfig(seats=10_000_000, lease_seconds=3600, max_lease_seconds=3600)
    if license_id.startswith("plain"):
        return plain
    return replace(
        plain,
        expires_at=TERM_ENDS,
        grace_seconds=7 * 86400,
        entitlements=ENTITLEMENTS,
        max_version="2026.10",
    )


def run_batch(redis: Any, script: Any, license_id: str, clients: list[str]) -> None:
    terms = not license_id.startswith("plain")
    for start in range(0, len(clients), PIPELINE):
        pipe = redis.pipeline(transaction=False)
        for client_id in clients[start : start + PIPELINE]:
            extra: dict[str, Any] = (
                {"entitlements": NEEDS, "version": VERSION, "seats": WEIGHT} if terms else {}
            )
            keys, args = acquire_call(
                TENANT, license_id, client_id, metadata_json=META,
                request_id=new_request_id(), session_id=new_session_id(), **extra,
            )  # fmt: skip
            script(keys=keys, args=args, client=pipe)
        for reply in pipe.execute():
            weight = decode(reply).weight if terms else 1
            if reply[0] != "acquired" or weight != (WEIGHT if terms else 1):
                raise RuntimeError(f"{license_id}: {reply!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--old-rev", default="e460b18")
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)
    times = interleave(
        old_rev=args.old_rev,
        kinds=("plain", "terms+w4"),
        config=config,
        run_batch=run_batch,
        fill=[f"fill-{i:06d}" for i in range(args.leases)],
        fill_note=f"terms+w4: of weight {WEIGHT}",
        callers=lambda r: [f"r{r:03d}-{i:06d}" for i in range(args.batch)],
        rounds=args.rounds,
        batch=args.batch,
    )
    report(
        times,
        (
            ("terms+w4 / plain, old", ("terms+w4", "old"), ("plain", "old")),
            ("terms+w4 / plain, new", ("terms+w4", "new"), ("plain", "new")),
            ("terms+w4 new / old", ("terms+w4", "new"), ("terms+w4", "old")),
            ("plain new / plain old", ("plain", "new"), ("plain", "old")),
        ),
        "; target terms+w4 / plain 1.1x",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
