"""What the seat calls answer, in one place: the engine's values (``seatlease.seats.values``)
as the contract's JSON (docs/design.md, api/openapi.yaml), with the signed token
(``seatlease.api.tokens``), the headers, and the fields of the call's log line.

acquire and heartbeat both answer a lease: its deadline, heartbeat interval, weight,
terms and token are written here once, so the two answers (and the tokens the clients
verify offline) cannot drift apart. Each function returns what an ``endpoint`` handler
returns: ``(status, body)`` or ``(status, body, headers)``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from seatlease.api.tokens import Signer, machine_claim, user_claim, weight_field
from seatlease.clock import rfc3339
from seatlease.seats.values import QueuePlace

if TYPE_CHECKING:
    from seatlease.api.schemas import AcquireRequest, HeartbeatRequest, SessionRequest
    from seatlease.seats.terms import Terms
    from seatlease.seats.values import Lease, Release, Renewal

Answer = tuple[Any, ...]  # (status, body) or (status, body, headers)


class Call(Protocol):
    """What an answer needs of ``seatlease.api.http.Call`` (which imports the web
    framework this module does without): the caller's tenant and the log line's fields."""

    tenant_id: str
    log: dict[str, Any]


def terms_answer(terms: Terms | None) -> dict[str, Any]:
    """The answer's fields for a license with terms (None for a license without: no
    fields, the answer as it always was)."""
    if terms is None:
        return {}
    answer: dict[str, Any] = {"entitlements": list(terms.entitlements)}
    if terms.expires_at_ms:
        answer["license_expires_at"] = rfc3339(terms.expires_at_ms)
        answer["license_grace_ends_at"] = rfc3339(terms.ends_at_ms)
        answer["in_grace"] = terms.in_grace
    if terms.max_version:
        answer["max_version"] = terms.max_version
    if terms.cut:
        answer["cut_to_license_end"] = True
    return answer


def recovering_answer(until_ms: int | None) -> dict[str, Any]:
    """A grant made in a failover's recovery window, by a license that chose availability
    (``on_failover`` grant): the answer says so and until when the window lasts (the
    license may run over its seats by the holders who come back meanwhile)."""
    if until_ms is None:
        return {}
    return {"recovering": True, "recovering_until": rfc3339(until_ms)}


def shared_answer(sessions: int | None) -> dict[str, Any]:
    """A lease on a shared seat: the sessions on it, this one included."""
    return {} if sessions is None else {"shared_sessions": sessions}


def idle_answer(reclaim_at_ms: int | None) -> dict[str, Any]:
    """A lease warned for being idle: when it is reclaimed unless used (or busy) first."""
    return {} if reclaim_at_ms is None else {"idle_reclaim_at": rfc3339(reclaim_at_ms)}


def acquired(call: Call, sign: Signer, lease: Lease | QueuePlace, body: AcquireRequest) -> Answer:
    """acquire's answer: 201 a new lease, 200 one this client held (or got back), 202 a
    place in the wait queue (with ``Retry-After``, as a 409 and a 429 have)."""
    if isinstance(lease, QueuePlace):
        return _queued(call, lease)
    call.log.update(
        outcome="acquired" if lease.created else "renewed",
        seats_used=lease.seats_used,
        seats_total=lease.seats_total,
    )
    if lease.borrowed:
        call.log["borrowed"] = True
    if lease.recovered:
        call.log["recovered"] = True
    terms = lease.terms
    return (201 if lease.created else 200), {
        "session_id": lease.session_id,
        "license_id": lease.license_id,
        "client_id": lease.client_id,
        "lease_expires_at": rfc3339(lease.expires_at_ms),
        "lease_seconds": lease.lease_seconds,
        "heartbeat_interval_seconds": lease.heartbeat_interval_seconds,
        "seats_used": lease.seats_used,
        "seats_total": lease.seats_total,
        "overage": lease.overage,
        "borrowed": lease.borrowed,
        **weight_field(lease.seats),
        **terms_answer(terms),
        **recovering_answer(lease.recovering_until_ms),
        **shared_answer(lease.shared_sessions),
        **_token(
            call,
            sign,
            lease,
            license_id=lease.license_id,
            nonce=body.nonce,
            # the machine it was taken for: a client refuses a borrowed token elsewhere
            # (a borrowed lease's own: the machine it was borrowed for, whoever asks)
            machine=lease.machine or body.fingerprint,
        ),
    }


def _token(
    call: Call,
    sign: Signer,
    lease: Lease | Renewal,
    *,
    license_id: str,
    nonce: str | None,
    machine: str | None,
) -> dict[str, Any]:
    """The ``lease_token`` field of an acquire's or a heartbeat's answer: the lease's
    claims, signed."""
    return sign.lease(
        tenant_id=call.tenant_id,
        license_id=license_id,
        session_id=lease.session_id,
        client_id=lease.client_id,
        issued_at_ms=lease.now_ms,
        expires_at_ms=lease.expires_at_ms,
        nonce=nonce,
        **({"borrowed": True} if lease.borrowed else {}),
        **weight_field(lease.seats),
        **(lease.terms.claims() if lease.terms else {}),
        **machine_claim(machine),
        **user_claim(lease.user),
    )


def _queued(call: Call, place: QueuePlace) -> Answer:
    call.log.update(outcome="queued", position=place.position)
    body = {
        "queued": True,
        "license_id": place.license_id,
        "client_id": place.client_id,
        "position": place.position,
        "ticket": place.ticket,
        "retry_after_seconds": place.retry_after_seconds,
        "seats_used": place.seats_used,
        "seats_total": place.seats_total,
        **weight_field(place.seats),
    }
    return 202, body, {"Retry-After": str(place.retry_after_seconds)}


def renewed(call: Call, sign: Signer, renewal: Renewal, body: HeartbeatRequest) -> Answer:
    """heartbeat's answer: the lease's new deadline and token (a lease its token brought
    back is answered the same, and logged as ``recovered``)."""
    if renewal.recovered:
        call.log["recovered"] = True
    call.log["outcome"] = "renewed"
    return 200, {
        "session_id": renewal.session_id,
        "lease_expires_at": rfc3339(renewal.expires_at_ms),
        "lease_seconds": renewal.lease_seconds,
        "heartbeat_interval_seconds": renewal.heartbeat_interval_seconds,
        "borrowed": renewal.borrowed,
        **weight_field(renewal.seats),
        **terms_answer(renewal.terms),
        **idle_answer(renewal.idle_reclaim_at_ms),
        **_token(
            call,
            sign,
            renewal,
            license_id=body.license_id,
            nonce=body.nonce,
            machine=renewal.machine,  # a borrowed lease's machine
        ),
    }


def released(call: Call, sign: Signer, result: Release, body: SessionRequest) -> Answer:
    """release's answer: whether this call ended the lease, and its signed receipt."""
    call.log.update(
        outcome="released" if result.released else "already_gone",
        seats_used=result.seats_used,
        seats_total=result.seats_total,
    )
    return 200, {
        "released": result.released,
        "seats_used": result.seats_used,
        **sign.release(
            tenant_id=call.tenant_id,
            license_id=body.license_id,
            session_id=body.session_id,
            released=result.released,
            issued_at_ms=result.now_ms,  # the Redis clock, like every time in a token
            nonce=body.nonce,
        ),
    }
