"""``seatlease local``: run the whole stack on this machine (the README's run command)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from seatlease_cli.exits import EXIT_CONFLICT, EXIT_FAILED, CommandError


def register(subparsers: Any) -> None:
    local = subparsers.add_parser(
        "local",
        help="run Redis, the database, the Pub/Sub emulator and every function locally",
    )
    local.add_argument(
        "--port",
        type=int,
        default=8080,
        help="port for all functions (default 8080; `make run PORT=N` passes it)",
    )
    local.add_argument(
        "--reaper-interval", type=float, default=5.0, help="seconds between reaper runs"
    )
    local.add_argument(
        "--no-pubsub",
        action="store_true",
        help="run without the Pub/Sub emulator (no Java or gcloud needed): the reaper "
        "hands the lease events straight to the audit function",
    )
    local.set_defaults(func=cmd_local)
    demo = subparsers.add_parser(
        "demo", help="play the zombie-seat story against the running local stack"
    )
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    try:
        import seatlease_client  # noqa: F401 (the demo's clients are the vendor SDK)
    except ImportError:
        raise CommandError(
            "seatlease demo needs the vendor client seatlease-client, the 'demo' extra: "
            "pip install 'seatlease[demo]' (from a checkout: pip install -e shared/client)"
        ) from None
    from seatlease_cli.demo import load_state, play

    story = play(load_state())
    if story["report"].get("missing"):
        raise CommandError("seatlease demo: the audit trail is incomplete (see above)")
    return 0


def cmd_local(args: argparse.Namespace) -> int:
    from seatlease_cli.localstack import LocalStack, PortInUse, banner
    from seatlease_cli.localstate import AlreadyRunning, claim_folder
    from seatlease_cli.procs import MissingTool, port_open

    stack = LocalStack(
        port=args.port,
        reaper_interval=args.reaper_interval,
        pubsub=not args.no_pubsub,
        say=lambda line: print(line, file=sys.stderr, flush=True),
    )
    try:  # this folder's stack still running: said first, whatever the port
        claim_folder(stack.say)
    except AlreadyRunning as exc:
        raise CommandError(str(exc), EXIT_CONFLICT) from None
    if port_open(args.port):
        raise CommandError(str(PortInUse(args.port)), EXIT_FAILED)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print("starting seatlease locally:", file=sys.stderr, flush=True)
    try:
        state = stack.start()
        print(banner(state), flush=True)
        stopped.wait()
    except KeyboardInterrupt:
        pass
    except PortInUse as exc:  # taken between the check above and the bind
        raise CommandError(str(exc), EXIT_FAILED) from None
    except MissingTool as exc:
        hint = " (or run with --no-pubsub)" if "emulator" in str(exc) or "java" in str(exc) else ""
        raise CommandError(f"{exc}{hint}") from None
    finally:
        print("stopping ...", file=sys.stderr, flush=True)
        stack.stop()
    return 0
