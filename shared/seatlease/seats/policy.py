"""A license's policy, as vendors write it in a FlexNet options file: a per-user limit
(MAX), named groups of users with seats reserved for them (GROUP, RESERVE), users who
may not take a seat at all (EXCLUDE), and the fair wait queue's two timers.

The database stores the policy as one JSON column (``licenses.policy``); the seat engine
caches ``redis_form()`` of it next to the license's configuration, where acquire.lua
(``_policy.lua``) decides with it. A license without a policy caches nothing extra and
acquire takes the path it always took (docs/design.md, "License policy and the queue").
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from seatlease.fields import IDENTIFIER_PATTERN, UserName, policy_name

MAX_GROUPS = 64
MAX_USERS_PER_LIST = 1000
QUEUE_TICKET_SECONDS = 60  # a ticket not renewed within this drops out of the queue
QUEUE_HOLD_SECONDS = 30  # a freed seat waits this long for the queue's head
MAX_QUEUE_TICKET_SECONDS = 3600
MAX_QUEUE_HOLD_SECONDS = 600
# A queue's bound: at most this many clients wait on one license (default 10 x seats,
# capped here too); a newcomer beyond it is refused with 409 queue_full.
MAX_QUEUE_MAX = 10_000
QUEUE_MAX_PER_SEAT = 10

GroupName = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
Users = Annotated[list[UserName], Field(max_length=MAX_USERS_PER_LIST)]


class LicensePolicy(BaseModel):
    """Every field has an "off" value; a policy with all of them off is no policy."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_per_user: Annotated[int, Field(ge=0, le=1_000_000)] = 0  # 0: no per-user limit
    groups: Annotated[dict[GroupName, Users], Field(max_length=MAX_GROUPS)] = {}
    reserve: Annotated[
        dict[GroupName, Annotated[int, Field(ge=0)]], Field(max_length=MAX_GROUPS)
    ] = {}
    deny_users: Users = []
    queue: bool = False  # "queue": true on acquire waits in line instead of a 409
    queue_ticket_seconds: Annotated[int, Field(ge=1, le=MAX_QUEUE_TICKET_SECONDS)] = (
        QUEUE_TICKET_SECONDS
    )
    queue_hold_seconds: Annotated[int, Field(ge=1, le=MAX_QUEUE_HOLD_SECONDS)] = QUEUE_HOLD_SECONDS
    # None: 10 x the license's seats, at most MAX_QUEUE_MAX (a stored policy from before
    # the bound has none: the JSON column needs no migration)
    queue_max: Annotated[int, Field(ge=1, le=MAX_QUEUE_MAX)] | None = None

    @field_validator("reserve")
    @classmethod
    def _reserve_names_groups(cls, value: dict[str, int], info: ValidationInfo) -> dict:
        unknown = sorted(set(value) - set(info.data.get("groups", {})))
        if unknown:
            raise ValueError(f"names an unknown group: {', '.join(unknown)}")
        return value

    @property
    def is_empty(self) -> bool:
        return self == LicensePolicy()

    @property
    def needs_user(self) -> bool:
        """A request must name its ``user`` when the policy judges users."""
        return bool(self.max_per_user or any(self.reserve.values()) or self.deny_users)

    @property
    def reserved(self) -> int:
        return sum(self.reserve.values())

    def queue_bound(self, seats: int) -> int:
        """How many clients may wait: ``queue_max``, or 10 x seats at most 10,000."""
        return self.queue_max or min(QUEUE_MAX_PER_SEAT * seats, MAX_QUEUE_MAX)

    def problem_with_seats(self, seats: int) -> str | None:
        """Why this policy cannot go with ``seats``, or None."""
        if self.reserved > seats:
            return f"reserve: {self.reserved} seats reserved in all, more than the {seats} seats"
        return None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def redis_form(self) -> str:
        """The JSON the seat engine caches (``SeatEngine.cache_config`` spreads it over
        the license's ``cfg`` hash, see ``_policy.lua``): the rules in ``policy`` and, in
        ``users``, each user's facts: ``!`` for a denied user, else the names of the
        user's groups that reserve seats, in name order (the order a lease is charged to
        them); users with neither are absent. Users are keyed by ``policy_name`` (the
        engine sends acquire's ``user`` in that form too)."""
        facts: dict[str, str] = {}
        for group in sorted(self.reserve):
            if self.reserve[group] > 0:
                members = (policy_name(u) for u in self.groups.get(group, []))
                for user in dict.fromkeys(m for m in members if m):
                    facts[user] = f"{facts[user]} {group}" if user in facts else group
        facts.update(dict.fromkeys((n for u in self.deny_users if (n := policy_name(u))), "!"))
        reserve = {g: n for g, n in self.reserve.items() if n > 0}
        rules = {
            "mpu": self.max_per_user,
            "reserve": reserve,
            "rtotal": sum(reserve.values()),
            "needs_user": int(self.needs_user),
            "q": int(self.queue),
            "qt": self.queue_ticket_seconds * 1000,
            "qh": self.queue_hold_seconds * 1000,
            "qm": self.queue_max or 0,  # 0: the default, 10 x seats (acquire.lua knows them)
        }
        return json.dumps({"policy": rules, "users": facts}, separators=(",", ":"))


def parse_policy(value: Any) -> LicensePolicy | None:
    """A stored policy (the JSON column's dict, or None) as a model; None when empty."""
    if not value:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    policy = LicensePolicy.model_validate(value)
    return None if policy.is_empty else policy
