"""A license's term, entitlements and version range on the seat engine's side: the
fields ``SeatEngine.cache_config`` writes into the license's ``cfg`` hash for the seat
scripts (lua/_lib.lua, ``load_terms``), and ``Terms``, what a seat answer carries of
them (its terms' fields, seats/protocol/replies.py) and the lease token's claims they make.
docs/design.md, "Terms, grace, entitlements and versions"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seatlease.licenses import LicenseConfig, epoch_ms, version_text


@dataclass(frozen=True, slots=True)
class Terms:
    """A license's term, entitlements and version range as a seat answer carries them
    (only for a license that has some): what the lease token's ``lexp``, ``ent`` and
    ``maxv`` say."""

    expires_at_ms: int = 0  # 0: no end
    ends_at_ms: int = 0  # expires_at + grace: when the license stops (0: no end)
    in_grace: bool = False  # past expires_at, before its end
    cut: bool = False  # the deadline was cut to the license's end
    entitlements: tuple[str, ...] = ()
    max_version: str | None = None

    def claims(self) -> dict[str, Any]:
        """The lease token's claims for them: ``ent`` (always, with terms), ``lexp``
        (epoch seconds of the end, when there is one), ``maxv`` (when set)."""
        claims: dict[str, Any] = {"ent": list(self.entitlements)}
        if self.ends_at_ms:
            claims["lexp"] = self.ends_at_ms // 1000
        if self.max_version:
            claims["maxv"] = self.max_version
        return claims


def cache_fields(config: LicenseConfig) -> dict[str, Any]:
    """The cfg hash's fields for a license with terms (lua/_lib.lua, ``load_terms``): each
    on its own, and all of them in ``terms`` as one text (``terms_text``), which the seat
    scripts read with the rest of the configuration (no second HMGET). The fields on
    their own stay for scripts of the release before, which read them whenever ``terms``
    is set (it used to be ``1``)."""
    fields: dict[str, Any] = {}
    if config.starts_at is not None:
        fields["starts"] = epoch_ms(config.starts_at)
    if config.expires_at is not None:
        fields["exp"] = epoch_ms(config.expires_at)
        fields["fin"] = config.ends_at_ms
        if config.on_expiry == "keep_leases":
            fields["keep"] = 1
    if config.entitlements:
        # padded with spaces for a plain find of " name ", and as the answer lists them
        fields["ent"] = f" {' '.join(config.entitlements)} "
        fields["entc"] = ",".join(config.entitlements)
    if config.max_version:
        fields["maxv"] = config.max_version
        fields["maxk"] = version_text(config.max_version)
    return {"terms": terms_text(fields), **fields}


TERMS_FIELDS = ("starts", "exp", "fin", "keep", "ent", "entc", "maxv", "maxk")


def terms_text(fields: dict[str, Any]) -> str:
    """The fields as ``T|starts|exp|fin|keep|ent|entc|maxv|maxk`` ('' for an absent one):
    load_terms's pattern. Every value is a number, a version or entitlement names
    (ENTITLEMENT_PATTERN), none holding a ``|``."""
    values = [str(fields.get(name, "")) for name in TERMS_FIELDS]
    if any("|" in value for value in values):  # not one of the values above: never cached
        raise ValueError(f"a license's terms cannot hold '|': {values!r}")
    return "|".join(["T", *values])
