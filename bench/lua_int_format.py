"""The number formatting an acquire does, with and without _lib.lua's ``int_arg``.

Inside one EVAL on a private redis-server, a loop repeats the conversions acquire.lua makes
of its numbers for a new lease (the prune's ``now``, two ZADDs of the deadline, the reply
hash's PEXPIREAT, and the event's seats_used, seats_total, count and sequence number spliced
into its JSON), each number handed over as before (a Lua number: Redis formats it with
'%.17g', Lua's concatenation with '%.14g') or through ``int_arg`` (formatted with '%d', the
deadline once for its two uses). The commands are ECHO, which does nothing with its
argument, and a third loop hands over ready-made strings: the floor, what the loop costs
without any formatting. Prints microseconds per simulated acquire (minimum of
``--samples`` EVALs of ``--loops`` iterations; other processes' load only adds time) and
the ratio to the floor's loop.

Run: ``python3 bench/lua_int_format.py`` (a few seconds).
"""

from __future__ import annotations

import argparse
import sys
import time

from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import helpers_source
from seatlease_cli.procs import start_redis

LOOP = """
local mode, loops = ARGV[1], tonumber(ARGV[2])
local base = 1790000000000
local seats, lease = 10000000, 360000
for i = 1, loops do
  local now = base + i
  local deadline = now + lease
  local pexp = (math.floor(now / 90000) + 2) * 90000
  if mode == 'number' then
    redis.call('ECHO', now)
    redis.call('ECHO', deadline)
    redis.call('ECHO', deadline)
    redis.call('ECHO', pexp)
    local _ = '"seats_used":' .. (i % 1000) .. ',"seats_total":' .. seats .. ',"count":' .. 1
      .. ',"event_id":"p-' .. i
  elseif mode == 'int_arg' then
    redis.call('ECHO', int_arg(now))
    local deadline_text = int_arg(deadline)
    redis.call('ECHO', deadline_text)
    redis.call('ECHO', deadline_text)
    redis.call('ECHO', int_arg(pexp))
    local _ = '"seats_used":' .. int_arg(i % 1000) .. ',"seats_total":' .. int_arg(seats)
      .. ',"count":' .. int_arg(1) .. ',"event_id":"p-' .. int_arg(i)
  else
    redis.call('ECHO', 'a')
    redis.call('ECHO', 'b')
    redis.call('ECHO', 'b')
    redis.call('ECHO', 'c')
    local _ = '"seats_used":' .. 'd' .. ',"seats_total":' .. 'e' .. ',"count":' .. 'f'
      .. ',"event_id":"p-' .. 'g'
  end
end
return 1
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--loops", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=9)
    args = parser.parse_args(argv)
    lib = helpers_source()
    source = lib + LOOP
    server = start_redis()
    try:
        client = connect(server.url, socket_timeout=120)
        script = client.register_script(source)
        best: dict[str, float] = {}
        for _ in range(args.samples):
            for mode in ("strings", "number", "int_arg"):
                started = time.perf_counter()
                script(args=[mode, args.loops])
                usec = (time.perf_counter() - started) * 1e6 / args.loops
                best[mode] = min(best.get(mode, usec), usec)
        floor = best["strings"]
        print(f"per simulated acquire, minimum of {args.samples} x {args.loops:,} iterations")
        for mode, label in (("strings", "floor (ready strings)"), ("number", "Lua numbers"),
                            ("int_arg", "int_arg")):  # fmt: skip
            usec = best[mode]
            print(f"  {label:<22}{usec:7.2f} us  {usec / floor:5.2f}x floor  "
                  f"formatting {usec - floor:5.2f} us")  # fmt: skip
        saved = best["number"] - best["int_arg"]
        print(f"int_arg saves {saved:.2f} us per acquire")
        client.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
