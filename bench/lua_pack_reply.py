"""The reply store's packing of the common replies: ``pack_reply`` (which packs a new
lease's or renewal's reply, a heartbeat's ``ok`` and a release's reply with their own few
``string.format``s; ``terms_w4``: a new lease's with a license's terms and a weight)
against ``pack_any`` (the generic packer, element by element, which packed every reply
before; both make the same text, tests/test_reply_store.py).

Inside one EVAL on a private redis-server, a loop packs the same reply ``--loops`` times;
a loop that only reads the reply is the floor. Prints microseconds per packing (minimum of
``--samples`` EVALs; other processes' load only adds time), net of the floor.

Run: ``python3 bench/lua_pack_reply.py`` (a few seconds).
"""

from __future__ import annotations

import argparse
import sys
import time

from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import helpers_source
from seatlease_cli.procs import start_redis

LOOP = """
local mode, shape, loops = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = 1795000000000
local replies = {
  acquired = {'acquired', 'AbCdEfGhIjKlMnOpQrStUvWx', now + 360000, 360000, 10001, 10000000,
    10000000, now, 0},
  ok = {'ok', now + 360000, 360000, now, 0, 'laptop-0000123'},
  released = {'released', 10000, 10000000, 0, now},
  -- a weight-4 lease on a license with terms (bench/redis_cost.py's terms row)
  terms_w4 = {'acquired', 'AbCdEfGhIjKlMnOpQrStUvWx', now + 360000, 360000, 40004, 10000000,
    10000000, now, 0, now + 31536000000, now + 32140800000, 0,
    'cloud,design,pro,render,render.gpu,sim,team,viewer', '2026.10', 4},
}
local reply, text = replies[shape], nil
for _ = 1, loops do
  if mode == 'pack_reply' then
    text = pack_reply(reply)
  elseif mode == 'pack_any' then
    text = pack_any(reply)
  else
    text = reply[1]
  end
end
return text
"""

SHAPES = ("acquired", "ok", "released", "terms_w4")
MODES = ("floor", "pack_any", "pack_reply")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--loops", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=9)
    args = parser.parse_args(argv)
    lib = helpers_source()
    server = start_redis()
    try:
        client = connect(server.url, socket_timeout=120)
        script = client.register_script(lib + LOOP)
        best: dict[tuple[str, str], float] = {}
        texts: dict[tuple[str, str], str] = {}
        for _ in range(args.samples):
            for shape in SHAPES:
                for mode in MODES:
                    started = time.perf_counter()
                    texts[mode, shape] = script(args=[mode, shape, args.loops])
                    usec = (time.perf_counter() - started) * 1e6 / args.loops
                    best[mode, shape] = min(best.get((mode, shape), usec), usec)
        print(f"us per packing, net of the loop, minimum of {args.samples} x {args.loops:,}")
        print(f"  {'reply':<10}{'pack_any':>10}{'pack_reply':>12}{'saved':>8}  same text")
        for shape in SHAPES:
            generic = best["pack_any", shape] - best["floor", shape]
            own = best["pack_reply", shape] - best["floor", shape]
            same = texts["pack_any", shape] == texts["pack_reply", shape]
            print(f"  {shape:<10}{generic:>10.2f}{own:>12.2f}{generic - own:>8.2f}  {same}")
        client.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
