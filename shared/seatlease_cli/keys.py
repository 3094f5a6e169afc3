"""``seatlease keys rotate|list|pin``: the Ed25519 keys that sign the lease tokens.

The key source is named, never guessed: ``--dir DIR`` (a folder of ``<n>.pem`` files, what
``SIGNING_KEYS_DIR`` names for the functions) or ``--secret projects/P/secrets/S`` (Secret
Manager, what ``SIGNING_KEY_SECRET`` names), else those environment variables, else (for
``list`` and ``pin`` only, which read) the local stack's ``.seatlease/signing-keys``.

``pin`` prints what a product ships to verify its grants (every client is verified by
default): the ``x`` of each key the JWKS serves now, comma separated, the form the
clients' ``pinned_keys`` and the ``hold`` programs' ``SEATLEASE_PINNED_KEYS`` take. Pin
before a rotation's new key signs (``--activate-in``), and ship the new key in a release.

``rotate`` makes a new key with pyca/cryptography on this machine and stores it: in a
folder, as the next ``<n>.pem`` (signs at once); in Secret Manager, as a new version whose
public key is published in the secret's annotations at once and which signs from
``--activate-in`` seconds later (600 by default: every JWKS cache has seen it by then).
Until then and for the longest token lifetime after, the previous key stays in the JWKS
(seatlease/api/signingkeys.py). The private key is never printed.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from typing import Any

from seatlease_cli.exits import EXIT_USAGE, CommandError
from seatlease_cli.output import add_json_flag, emit

DEFAULT_ACTIVATE_IN = 600


def register(subparsers: Any) -> None:
    keys = subparsers.add_parser("keys", help="the keys that sign the lease tokens (JWKS)")
    sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    source = argparse.ArgumentParser(add_help=False)
    where = source.add_mutually_exclusive_group()
    where.add_argument("--dir", help="a folder of <n>.pem keys (default: $SIGNING_KEYS_DIR)")
    where.add_argument(
        "--secret", help="Secret Manager secret projects/P/secrets/S (default: $SIGNING_KEY_SECRET)"
    )
    add_json_flag(source)

    rotate = sub.add_parser(
        "rotate",
        parents=[source],
        help="make the next signing key; the previous one stays published",
        description=(__doc__ or "").split("\n\n", 2)[2],
    )
    rotate.add_argument(
        "--activate-in",
        type=int,
        default=None,
        metavar="SECONDS",
        help=f"Secret Manager: start signing this long after publishing "
        f"(default {DEFAULT_ACTIVATE_IN}; longer if products must pin the key first)",
    )
    rotate.set_defaults(func=cmd_rotate)
    listing = sub.add_parser(
        "list", parents=[source], help="the keys, which one signs, which the JWKS serves"
    )
    listing.set_defaults(func=cmd_list)
    pin = sub.add_parser(
        "pin",
        parents=[source],
        help="the keys' x a product pins (every key the JWKS serves), comma separated",
    )
    pin.set_defaults(func=cmd_pin)


def _source(args: argparse.Namespace, *, local: bool = False) -> tuple[str, str]:
    """Where the keys are: the flags, else the environment, else (``local``: a command
    that only reads) the local stack's folder of keys, when one is found."""
    if args.dir:
        return "dir", args.dir
    if args.secret:
        return "secret", args.secret
    folder = os.environ.get("SIGNING_KEYS_DIR", "").strip()
    secret = os.environ.get("SIGNING_KEY_SECRET", "").strip()
    if folder and not secret:
        return "dir", folder
    if secret and not folder:
        return "secret", secret
    if local and not folder and not secret:
        from seatlease_cli.backend import find_state_file

        state_file = find_state_file()
        if state_file is not None and (state_file.parent / "signing-keys").is_dir():
            return "dir", str(state_file.parent / "signing-keys")
    raise CommandError(
        "name the keys: --dir DIR (a folder of PEM keys) or --secret projects/P/secrets/S "
        "(or set exactly one of SIGNING_KEYS_DIR and SIGNING_KEY_SECRET)",
        EXIT_USAGE,
    )


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def cmd_rotate(args: argparse.Namespace) -> int:
    from seatlease.api import secretmanager, signingkeys

    kind, where = _source(args)
    if kind == "dir":
        if args.activate_in:
            raise CommandError("--activate-in is for Secret Manager keys", EXIT_USAGE)
        path = signingkeys.next_key_file(where)
        versions = signingkeys.DirectoryKeys(where).versions()
        new = next(v for v in versions if v.number == int(path.stem))
        answer = {"kid": new.kid, "file": str(path), "signs_from": _when(new.signs_from)}
    else:
        activate_in = DEFAULT_ACTIVATE_IN if args.activate_in is None else args.activate_in
        if activate_in < 0:
            raise CommandError("--activate-in must be 0 or more seconds", EXIT_USAGE)
        secretmanager.check_secret_name(where)
        signs_from = time.time() + activate_in
        number, _public = secretmanager.add_key(
            secretmanager.client(), where, signingkeys.new_private_pem(), signs_from
        )
        answer = {
            "kid": str(number),
            "version": f"{where}/versions/{number}",
            "signs_from": _when(signs_from),
        }
    if args.json:
        emit(answer, True)
    else:
        print(f"new signing key {answer['kid']}: published now, signs from {answer['signs_from']}")
        print("the previous key stays in the JWKS until every token it signed has expired")
    return 0


def _plan(args: argparse.Namespace) -> tuple[list[Any], Any]:
    from seatlease.api import secretmanager, signingkeys

    kind, where = _source(args, local=True)
    if kind == "dir":
        versions = signingkeys.DirectoryKeys(where).versions()
    else:
        versions = secretmanager.read_keys(secretmanager.client(), where)
    max_token = float(
        os.environ.get("TOKEN_MAX_LIFETIME_SECONDS") or signingkeys.DEFAULT_MAX_TOKEN_SECONDS
    )
    return versions, signingkeys.plan(versions, time.time(), max_token)


def cmd_pin(args: argparse.Namespace) -> int:
    from seatlease.api import signingkeys

    _, plan = _plan(args)
    pinned = [signingkeys.b64url(v.public) for v in plan.published if v.public]
    if not pinned:
        raise CommandError("no key is published yet: `seatlease keys rotate` makes one", 1)
    if args.json:
        emit({"pinned_keys": pinned}, True)
    else:
        print(",".join(pinned))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from seatlease.api import signingkeys

    versions, plan = _plan(args)
    served = {v.kid for v in plan.published}
    rows = []
    for version in sorted(versions, key=lambda v: v.number):
        if version.public is None:
            state = "unpublished (never signs)"
        elif plan.signer is not None and version.kid == plan.signer.kid:
            state = "signing"
        elif version.kid in plan.retires_at:
            state = f"previous, in the JWKS until {_when(plan.retires_at[version.kid])}"
        elif version.kid in served:
            state = f"next, signs from {_when(version.signs_from)}"
        else:
            state = "retired (not in the JWKS)"
        rows.append(
            {
                "kid": version.kid,
                "created": _when(version.created),
                "state": state,
                "x": signingkeys.b64url(version.public) if version.public else None,
            }
        )
    emit(rows, args.json, ["kid", "created", "state", "x"])
    return 0
