"""What a seat call makes before it runs: session ids, request ids, event id prefixes,
and the lease's metadata with who asks."""

from __future__ import annotations

import secrets
from typing import Any


def new_session_id() -> str:
    """24 random characters of [A-Za-z0-9_-] (about 143.9 bits), never starting with "-":
    operators type session ids after options (``seatlease revoke --session ID``), where
    a leading dash reads as an option (argparse: "expected one argument")."""
    return _no_leading_dash(18)


def new_event_prefix() -> str:
    return secrets.token_hex(8)


def new_request_id() -> str:
    return _no_leading_dash(12)  # quoted to operators in 503 answers, like session ids


def _no_leading_dash(nbytes: int) -> str:
    while True:
        token = secrets.token_urlsafe(nbytes)
        if token[0] != "-":
            return token


def with_identity(
    metadata: dict[str, Any] | None, user: str | None, host: str | None
) -> dict[str, Any]:
    """The lease's metadata with the request's ``user`` and ``host`` (they win over the
    metadata's own keys of those names): how they reach status, events and reports."""
    merged = dict(metadata or {})
    if user is not None:
        merged["user"] = user
    if host is not None:
        merged["host"] = host
    return merged


# A refusal's note (lua/_refusals.lua) keeps the user in at most this many bytes of UTF-8:
# a request's ``user`` is at most 128 characters, but its metadata's may be 4 KB.
USER_NOTE_BYTES = 128


def shown_host(metadata: dict[str, Any]) -> str | None:
    """The host the lease's metadata shows, cut as ``shown_user`` cuts the user: a license
    that shares seats by host groups leases by it."""
    host = metadata.get("host")
    if not isinstance(host, str) or not host:
        return None
    cut = host.encode("utf-8", "surrogatepass")[:USER_NOTE_BYTES]
    return cut.decode("utf-8", "ignore") or None


def shown_user(metadata: dict[str, Any]) -> str | None:
    """The user the lease's metadata shows (a string ``user``; anything else is none), cut
    to ``USER_NOTE_BYTES`` of UTF-8 at a character's end: a refusal is noted with it, as
    the per-user report counts leases by it."""
    user = metadata.get("user")
    if not isinstance(user, str) or not user:
        return None
    cut = user.encode("utf-8", "surrogatepass")[:USER_NOTE_BYTES]
    return cut.decode("utf-8", "ignore") or None
