"""The Lua seat scripts, each registered once per Redis client through redis-py ``Script``.

``Script`` calls EVALSHA and, on NOSCRIPT (a restarted or failed-over server), loads the
script and retries: no hand-written retry loop. Each script is ``_lib.lua`` followed by
its own file, so shared helpers exist once and every call is still one EVALSHA. The
client-facing seat scripts (``RATE_LIMITED``) also get ``_ratelimit.lua``, the tenant's
call budget, between the two.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script

SCRIPT_NAMES = (
    "acquire",
    "heartbeat",
    "release",
    "reclaim",
    "flush_denials",
    "cache_config",
    "sweep_tickets",
    "arm_notice",
    "notices",
    "cut_held",
    "readmit",
    "flush_refusals",
)

# Helpers only some scripts need, placed between _lib.lua and the script: the seat calls
# check the tenant's rate budget (_ratelimit.lua); acquire decides the license policy, and
# release hands a seat it frees to the license's wait queue.
PRELUDES = {
    "acquire": ("_ratelimit", "_policy", "_refusals"),
    "flush_refusals": ("_refusals",),
    "heartbeat": ("_ratelimit",),
    "release": ("_ratelimit", "_policy"),  # a freed seat is held for the queue at once
    "reclaim": ("_policy",),  # ... and one the reaper frees
}


@cache
def script_source(name: str) -> str:
    lua = resources.files("seatlease.seats") / "lua"
    parts = ["_lib", *PRELUDES.get(name, ()), name]
    return "\n".join((lua / f"{part}.lua").read_text() for part in parts)


class SeatScripts:
    """The registered scripts of one Redis client."""

    def __init__(self, client: Any) -> None:
        self.acquire: Script = client.register_script(script_source("acquire"))
        self.heartbeat: Script = client.register_script(script_source("heartbeat"))
        self.release: Script = client.register_script(script_source("release"))
        self.reclaim: Script = client.register_script(script_source("reclaim"))
        self.flush_denials: Script = client.register_script(script_source("flush_denials"))
        self.cache_config: Script = client.register_script(script_source("cache_config"))
        self.sweep_tickets: Script = client.register_script(script_source("sweep_tickets"))
        self.arm_notice: Script = client.register_script(script_source("arm_notice"))
        self.notices: Script = client.register_script(script_source("notices"))
        self.cut_held: Script = client.register_script(script_source("cut_held"))
        self.readmit: Script = client.register_script(script_source("readmit"))
        self.flush_refusals: Script = client.register_script(script_source("flush_refusals"))
