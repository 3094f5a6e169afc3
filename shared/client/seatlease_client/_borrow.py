"""Borrowed seats: a seat taken for a fixed time with no heartbeats (a laptop going
offline), saved to a file with its signed token, verified offline later and returned
early on request.

The file is JSON: the acquire request as sent (with its ``nonce``), the answer (with its
``lease_token``), and the deployment's JWKS as it was at borrow time, so that the token
can be verified without the network by the same ``TokenVerifier`` that checks live
answers (``_verify``). That verifier trusts the saved JWKS only as
far as the client's pinned keys allow: a product that must not be fooled by an edited
file pins the vendor's keys (``SeatClient(pinned_keys=...)``); without them the file
proves only that it is consistent with itself.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from datetime import datetime
from typing import Any, Protocol

from seatlease_client._claims import Claims, _parse_time, claimed_seats
from seatlease_client._errors import BackendUnavailable, MalformedToken, TokenMismatch
from seatlease_client._machine import this_machine
from seatlease_client._verify import TokenVerifier, new_nonce

FORMAT = "seatlease-borrowed-seat/1"


class BorrowClient(Protocol):
    """What borrowing, loading and returning a seat ask of the client (``SeatClient`` is
    one): its calls, its JWKS and the keys and machine it verifies against. Declared
    here, so that the borrowed seat depends on no client module."""

    base_url: str
    _verifier: TokenVerifier | None
    _pinned_keys: list[Any]
    _tenant_id: str | None
    _token_leeway: float
    _machine_id: str | None

    def _call(self, function: str, body: dict[str, Any]) -> Any: ...

    def _fetch_jwks(self) -> bytes: ...

    def _release_refused(self, body: dict[str, Any], reply: Any) -> None: ...

    def release(self, license_id: str, session_id: str) -> Any: ...


class BorrowedSeat:
    """A borrowed seat whose token verified: ``expires_at`` (aware UTC, the token's
    ``exp``) is when it ends by itself; ``return_early()`` gives it back before. No
    heartbeats are needed (or sent) until then."""

    def __init__(
        self,
        client: BorrowClient,
        path: str,
        answer: dict[str, Any],
        claims: Claims,
    ) -> None:
        self._client = client
        self.path = path
        self.license_id = str(answer["license_id"])
        self.client_id = str(answer["client_id"])
        self.session_id = str(answer["session_id"])
        self.borrow_seconds = int(answer["lease_seconds"])
        self.expires_at: datetime = _parse_time(answer["lease_expires_at"])
        self.token = str(answer["lease_token"])
        self.claims = claims  # the verified token's claims (exp, aud, sub, borrowed, ...)
        # The seat's weight as the token signs it (its seats claim; 1 when absent).
        self.seats = claimed_seats(claims)

    def __repr__(self) -> str:
        return (
            f"BorrowedSeat(license_id={self.license_id!r}, client_id={self.client_id!r}, "
            f"session_id={self.session_id!r}, expires_at={self.expires_at!r})"
        )

    @property
    def seconds_left(self) -> float:
        """Seconds until the borrow ends (by this machine's clock), 0 once it has."""
        return max(0.0, self.expires_at.timestamp() - time.time())

    @property
    def expired(self) -> bool:
        return self.seconds_left <= 0

    def return_early(self) -> dict[str, Any]:
        """Release the seat now (one POST /release, retried like any call) and delete the
        saved file; the release answer (``released`` false: it had already ended)."""
        answer = self._client.release(self.license_id, self.session_id)
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        return answer


def _save(path: str, document: dict[str, Any]) -> None:
    """Write the file atomically (a crash leaves the old file or the new one, never half
    of one), readable by this user only."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".borrowed-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise


def borrow(
    client: BorrowClient,
    license_id: str,
    client_id: str,
    seconds: int,
    path: Any,
    metadata: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
) -> BorrowedSeat:
    """Acquire a borrowed seat, save it to ``path`` and return it verified; ``identity``:
    user, host, entitlements, version, seats and request_id, sent when not None. A seat
    whose saved token does not verify is released at once."""
    path = os.fspath(path)
    request: dict[str, Any] = {
        "license_id": license_id,
        "client_id": client_id,
        "borrow_seconds": seconds,
        "nonce": new_nonce(),  # kept in the file: the token must carry it
        # the seat is bound to this machine: the token carries it, and a copy of the
        # file verifies nowhere else
        "fingerprint": this_machine(client._machine_id),
    }
    if metadata is not None:
        request["metadata"] = metadata
    request.update({k: v for k, v in (identity or {}).items() if v is not None})
    answer = client._call("acquire", request)
    try:
        if client._verifier is not None:  # the keys that just verified the grant
            jwks = client._verifier.jwks_document()
        else:
            try:
                jwks = json.loads(client._fetch_jwks())
            except ValueError:
                raise MalformedToken(0, "token_unknown_kid", "The JWKS is not JSON.") from None
        document = {
            "format": FORMAT,
            "base_url": client.base_url,
            "request": request,
            "answer": answer,
            "jwks": jwks,
        }
        _save(path, document)
        try:
            return load(client, path)
        except Exception:
            os.remove(path)  # a seat that does not verify is no seat: nothing saved
            raise
    except BackendUnavailable:
        raise  # transient (the JWKS unreachable): a good grant, never released for it
    except Exception:
        client._release_refused(request, answer)  # and it is given back at once
        raise


def load(client: BorrowClient, path: Any) -> BorrowedSeat:
    """The borrowed seat saved at ``path``, verified offline (no request is sent):
    signature (the saved JWKS within the client's pinned keys), audience, session,
    client, nonce, ``exp`` (``TokenExpired`` once the borrow has ended, beyond the
    client's leeway), the ``borrowed`` claim and the machine (``TokenWrongMachine`` when
    ``cnf.machine`` is not this machine's fingerprint). Any failure raises a
    ``TokenError``."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as saved:
        try:
            document = json.load(saved)
            request, answer, jwks = document["request"], document["answer"], document["jwks"]
            if document.get("format") != FORMAT or not isinstance(answer, dict):
                raise TypeError("format")
            raw_jwks = json.dumps(jwks).encode()
        except (ValueError, TypeError, KeyError):
            raise MalformedToken(
                0, "token_malformed", f"{path} is not a saved borrowed seat."
            ) from None
    verifier = TokenVerifier(
        lambda: raw_jwks,
        pinned_keys=client._pinned_keys,
        tenant_id=client._tenant_id,
        leeway=client._token_leeway,
        machine_fingerprint=this_machine(client._machine_id),
    )
    claims = verifier.check("acquire", request, answer, 0)
    if claims.get("borrowed") is not True or answer.get("borrowed") is not True:
        raise TokenMismatch(0, "token_mismatch", "The saved seat is not a borrowed one.")
    return BorrowedSeat(client, path, answer, claims)
