"""The license policy's cost on acquire, this revision against an older one, interleaved.

``bench/redis_cost.py`` measures each phase in its own batch, so on a shared machine the
load of the moment lands on one phase and not the other (its per-round policy ratios
spread from 0.8x to 1.9x). This runs four variants in the same redis-server, in small
batches, rotating their order every round, so every variant sees the same load:

- ``plain (old)`` / ``plain (new)``: a new lease on a license without a policy;
- ``policy (old)`` / ``policy (new)``: a new lease on a license with ``redis_cost.py``'s
  full policy (at most 2 leases per user, the caller's user holding one; two groups of
  50 users with 10 reserved seats each; the queue on, empty),

"old" being acquire.lua (with its preludes) of ``--old-rev`` (default 53ff978, before
issue 29) and "new" this tree's, each on licenses it filled itself (``--leases`` leases
each, one per user). Per batch, the server's own time per call (``INFO commandstats``,
``usec_per_call`` of ``evalsha`` after ``CONFIG RESETSTAT``); per round the ratios
policy / plain of each revision and new / old; the medians over ``--rounds`` rounds are
printed, with the least disturbed estimate (minimum batch over minimum batch).

Run: ``python3 bench/policy_ab.py`` (about two minutes; a git checkout is needed to read
the old scripts).
"""

from __future__ import annotations

import argparse
from typing import Any

from interleaved import META, PIPELINE, TENANT, interleave, report

from seatlease.licenses import LicenseConfig
from seatlease.seats.ids import new_request_id, new_session_id
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.protocol.calls import acquire_call


def policy() -> LicensePolicy:
    return LicensePolicy(
        max_per_user=2,
        groups={
            "design": [f"designer-{i}" for i in range(50)],
            "render": [f"renderer-{i}" for i in range(50)],
        },
        reserve={"design": 10, "render": 10},
        queue=True,
        queue_ticket_seconds=3600,
    )


def config(license_id: str) -> LicenseConfig:
    form = policy().redis_form() if license_id.startswith("policy") else ""
    return LicenseConfig(seats=10_000_000, lease_seconds=3600, max_lease_seconds=3600, policy=form)


def run_batch(redis: Any, script: Any, license_id: str, clients: list[tuple[str, str]]) -> None:
    for start in range(0, len(clients), PIPELINE):
        pipe = redis.pipeline(transaction=False)
        for client_id, user in clients[start : start + PIPELINE]:
            keys, args = acquire_call(
                TENANT, license_id, client_id, metadata_json=META,
                request_id=new_request_id(), session_id=new_session_id(), user=user,
            )  # fmt: skip
            script(keys=keys, args=args, client=pipe)
        for reply in pipe.execute():
            if reply[0] != "acquired":
                raise RuntimeError(f"{license_id}: {reply!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--old-rev", default="53ff978")
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args(argv)
    if args.rounds * args.batch > args.leases:
        parser.error("--rounds x --batch must be at most --leases (one caller a filled user)")
    times = interleave(
        old_rev=args.old_rev,
        kinds=("plain", "policy"),
        config=config,
        run_batch=run_batch,
        fill=[(f"fill-{i:06d}", f"user-{i:06d}") for i in range(args.leases)],
        fill_note="one per user",
        # each caller's user already holds one lease (the per-user limit is 2)
        callers=lambda r: [
            (f"r{r:03d}-{i:06d}", f"user-{r * args.batch + i:06d}") for i in range(args.batch)
        ],
        rounds=args.rounds,
        batch=args.batch,
    )
    report(
        times,
        (
            ("policy / plain, old", ("policy", "old"), ("plain", "old")),
            ("policy / plain, new", ("policy", "new"), ("plain", "new")),
            ("policy new / policy old", ("policy", "new"), ("policy", "old")),
            ("plain new / plain old", ("plain", "new"), ("plain", "old")),
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
