"""The Lua seat scripts: the three a client calls as functions of one Redis function
library (FCALL), the rest each registered once per Redis client through redis-py ``Script``.

Each script is ``_lib.lua``, the helpers it needs (``PRELUDES``), the binding of its
named KEYS and ARGV (generated from its spec, seats/protocol/calls.py: ``k.leases``,
``a.tenant_id``) and its own file, so shared helpers exist once, no script indexes KEYS or
ARGV by number, and every call is still one command.

``Script`` calls EVALSHA and, on NOSCRIPT (a restarted or failed-over server), loads the
script and retries: no hand-written retry loop. But every EVALSHA runs its script's top
level again, defining each of ``_lib.lua``'s helpers anew (Redis allows no globals, so
nothing survives a call): a fifth of a heartbeat's server time (bench/fcall_ab.py). The
hot calls (``LIBRARY_SCRIPTS``: acquire, heartbeat, release) are therefore the functions
of a Redis 7 function library (``library_code``), whose top level runs once, at
``FUNCTION LOAD``. ``SeatLibrary`` calls them like ``Script`` and, as ``Script`` does on
NOSCRIPT, loads the library when a server answers that the function is not found (a
restarted server without persistence, a new shard) and calls again: the function did not
run, so the call is made once. Its name carries a digest of its code: two releases'
instances share one Redis during a rollout, each calling its own code. A server too old
for functions (Redis 6: no FUNCTION command) is called by EVALSHA instead, and so is a call
refused for memory or on a read-only replica (``SeatLibrary.call``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script
from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError

from seatlease.seats.protocol import replies
from seatlease.seats.protocol.calls import SPECS

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
    "flush_refusals",
)

# Helpers only some scripts need, placed between _lib.lua and the script: the seat calls
# check the tenant's rate budget (_ratelimit.lua); acquire decides the license policy, and
# release hands a seat it frees to the license's wait queue; acquire's own steps
# (_acquire.lua) come last, so that as the library's function they are defined once.
PRELUDES = {
    "acquire": ("_ratelimit", "_policy", "_refusals", "_idle", "_acquire"),  # _acquire: its steps
    "flush_refusals": ("_refusals",),
    "heartbeat": ("_ratelimit", "_idle"),
    "release": ("_ratelimit", "_policy"),  # a freed seat is held for the queue at once
    "reclaim": ("_policy",),  # ... and one the reaper frees
}

# A server's answer to a command it does not have (Redis 6; it quotes with backticks) or
# does not allow (an ACL; Memorystore answers NOPERM for a command it does not support):
# only FCALL's and FUNCTION's own, never a script's error from inside, which may have
# written.
_NOT_HERE = re.compile(r"(unknown command|no permissions to run the) [`']?(fcall|function)\b")

# The seat calls every client makes: called as the library's functions.
LIBRARY_SCRIPTS = ("acquire", "heartbeat", "release")


# Every script's first helpers: _lib.lua, and the reply store with the answers' names
# (_replies.lua, after the spec generated from protocol/replies.py).
BASE = ("_lib", "_replies")


def _lua(part: str) -> str:
    text = (resources.files("seatlease.seats") / "lua" / f"{part}.lua").read_text()
    return replies.lua_spec() + text if part == "_replies" else text


def helpers_source(*preludes: str) -> str:
    """``_lib.lua`` and ``preludes``, then ``begin_call()``: the start of a script for
    EVAL, ready for its own code (the seat scripts', or a test's or a bench's probe)."""
    return "\n".join([*(_lua(p) for p in (*BASE, *preludes)), "begin_call()\n"])


def _body(name: str) -> str:
    """``name``'s own code after the binding of its named KEYS and ARGV."""
    return SPECS[name].lua_binding() + _lua(name)


@cache
def script_source(name: str) -> str:
    """``name`` as one script for EVAL: its helpers, ``begin_call()``, the binding of its
    names, its own code."""
    if name in LIBRARY_SCRIPTS:  # answering by name, as its function does (library_code)
        helpers = "\n".join(_lua(p) for p in (*BASE, *PRELUDES.get(name, ())))
        return helpers + "\n" + replies.answering_lua("begin_call()\n" + _body(name))
    return helpers_source(*PRELUDES.get(name, ())) + _body(name)


@cache
def library_code() -> tuple[str, str]:
    """The seat library's name and its code (``FUNCTION LOAD``'s text). The name is
    ``seatlease_`` and a digest of the code, and each function is ``<name>_<script>``:
    Redis keeps function names in one namespace across libraries."""
    helpers: list[str] = [*BASE]
    for script in LIBRARY_SCRIPTS:
        helpers += [p for p in PRELUDES.get(script, ()) if p not in helpers]
    body = "\n".join(_lua(part) for part in helpers)
    # A function's parameters are named KEYS and ARGV, as under EVAL: the binding reads
    # them. begin_call starts each call's state (lua/_lib.lua).
    functions = "\n".join(
        f"redis.register_function('@NAME@_{script}', answering(function(KEYS, ARGV)\n"
        f"begin_call()\n{_body(script)}\nend))"
        for script in LIBRARY_SCRIPTS
    )
    code = f"{body}\n{functions}\n"
    name = "seatlease_" + hashlib.sha256(code.encode()).hexdigest()[:16]
    return name, f"#!lua name={name}\n" + code.replace("@NAME@", name)


@cache  # (on every seat call)
def library_function(script: str) -> str:
    """The library's function that runs ``script``."""
    return f"{library_code()[0]}_{script}"


class SeatLibrary:
    """The seat library on one Redis client (a cluster client loads it on every primary)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {}  # the same code for EVALSHA, made when needed
        self.fallback = False  # a server without functions: every call by EVALSHA

    def script(self, name: str) -> Script:
        """``name`` as an EVALSHA script (redis-py ``Script``) on this client."""
        if name not in self._scripts:
            self._scripts[name] = self.client.register_script(script_source(name))
        return self._scripts[name]

    def load(self) -> bool:
        """FUNCTION LOAD the library (REPLACE: a second instance loading the same code at
        the same time is no error). A server without the command gets the scripts. False
        when the server refused the load for now (out of memory, or a read-only replica:
        FUNCTION LOAD is a write): the call at hand goes by EVALSHA, and the next call
        that finds the function missing loads it again."""
        with self._lock:
            try:
                self.client.function_load(library_code()[1], replace=True)
            except (OutOfMemoryError, ReadOnlyError):
                return False
            except ResponseError as exc:
                if not _NOT_HERE.search(str(exc).lower()):
                    raise
                self.fallback = True
            return True

    def call(self, script: str, keys: list, args: list, client: Any) -> Any:
        """Run ``script`` as the library's function (by EVALSHA where functions cannot
        run). The product calls one at a time; a caller that queues calls in a pipeline
        (where a missing function cannot be loaded and called again) loads the library
        first (``load``)."""
        if self.fallback:
            return self.script(script)(keys=keys, args=args, client=client)
        try:
            return self._fcall(script, keys, args, client)
        except ResponseError as exc:
            text = str(exc).lower()
            if "function not found" not in text and not _NOT_HERE.search(text):
                raise
        # The function did not run (a server that lost or never had the library): load it
        # and call once more, so the call is made once. (Once: a server still without it
        # after the load answers with its error.) A full or read-only server refuses the
        # load: the script of the same code runs, as for a refused FCALL (_fcall), so a
        # release there still frees its seat and a repeat still gets its answer.
        if not self.load() or self.fallback:
            return self.script(script)(keys=keys, args=args, client=client)
        return self._fcall(script, keys, args, client)

    def _fcall(self, script: str, keys: list, args: list, client: Any) -> Any:
        try:
            return client.fcall(library_function(script), len(keys), *keys, *args)
        except (OutOfMemoryError, ReadOnlyError):
            # Redis refuses a function that may write, whole, while it is out of memory
            # (maxmemory, noeviction) or a read-only replica (a failover's old primary);
            # a script without flags runs and is refused only at its first write (one that
            # could grow memory). So by EVALSHA a release at a full Redis still frees a
            # seat and a repeated call still gets its stored answer, as they always did.
            # (The function did not run: running the script now makes the call once.)
            return self.script(script)(keys=keys, args=args, client=client)


class LibraryScript:
    """One function of the seat library, called as redis-py's ``Script`` is."""

    def __init__(self, library: SeatLibrary, script: str) -> None:
        self.library = library
        self.script = script

    def __call__(self, keys: Any = (), args: Any = (), client: Any = None) -> Any:
        return self.library.call(
            self.script,
            list(keys),
            list(args),
            client if client is not None else self.library.client,
        )


class SeatScripts:
    """The seat scripts of one Redis client."""

    def __init__(self, client: Any) -> None:
        self.library = SeatLibrary(client)
        self.acquire = LibraryScript(self.library, "acquire")
        self.heartbeat = LibraryScript(self.library, "heartbeat")
        self.release = LibraryScript(self.library, "release")
        self.reclaim: Script = client.register_script(script_source("reclaim"))
        self.flush_denials: Script = client.register_script(script_source("flush_denials"))
        self.cache_config: Script = client.register_script(script_source("cache_config"))
        self.sweep_tickets: Script = client.register_script(script_source("sweep_tickets"))
        self.arm_notice: Script = client.register_script(script_source("arm_notice"))
        self.notices: Script = client.register_script(script_source("notices"))
        self.cut_held: Script = client.register_script(script_source("cut_held"))
        self.flush_refusals: Script = client.register_script(script_source("flush_refusals"))
