"""The field types every room validates with: identifiers, user and host names, nonces,
metadata text, the longest lease, and a pydantic error turned into the contract's
``invalid_request``. The HTTP request bodies built from them are in ``api/schemas.py``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    ValidationError,
)

from seatlease.errors import InvalidRequest
from seatlease.licenses import ENTITLEMENT_PATTERN, MAX_ENTITLEMENTS, VERSION_PATTERN

IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:@-]{1,128}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
MetadataValue = str | int | float | bool | None
# What a license entitles to (its settings) and a product asks for (acquire): names of
# [a-z0-9._-], at most 64 of at most 64 characters; versions are dotted numbers.
EntitlementName = Annotated[str, StringConstraints(pattern=ENTITLEMENT_PATTERN)]
Entitlements = Annotated[list[EntitlementName], Field(max_length=MAX_ENTITLEMENTS)]
Version = Annotated[str, StringConstraints(pattern=VERSION_PATTERN)]
METADATA_MAX_BYTES = 4096
MAX_LEASE_SECONDS = 7 * 24 * 3600  # no license may allow more; each license sets its own max
NONCE_MAX_CHARS = 128
USER_MAX_CHARS = 128  # `user` and `host` on acquire, and the users a license policy names


def _nonce_text(value: str) -> str:
    if problem := text_problem(value):
        raise ValueError(f"nonce {problem}")
    return value


# Echoed in the answer's signed token, so that a product can refuse a replayed grant.
Nonce = Annotated[
    str, StringConstraints(min_length=1, max_length=NONCE_MAX_CHARS), AfterValidator(_nonce_text)
]


def user_text(field: str) -> Callable[[str], str]:
    """A validator for a user or host name: any text but what ``text_problem`` refuses
    (it reaches the audit log's JSON) and control characters (``control_problem``: it
    reaches operators' terminals)."""

    def check(value: str) -> str:
        if problem := text_problem(value) or control_problem(value):
            raise ValueError(f"{field} {problem}")
        return value

    return check


# Default-ignorable code points that are not of category Cf (format), which every
# renderer draws as nothing (Unicode's DerivedCoreProperties.txt): the combining grapheme
# joiner, the Hangul fillers, the Khmer inherent vowels, the variation selectors.
_IGNORABLE_NOT_CF = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def _invisible(char: str) -> bool:
    """A character drawn as nothing: a format character (Cf: zero-width space and
    joiners, soft hyphen, word joiner, byte order mark, bidi controls, tags...) or another
    default-ignorable code point."""
    return unicodedata.category(char) == "Cf" or ord(char) in _IGNORABLE_NOT_CF


def policy_name(user: str) -> str:
    """The form of a user name a license's policy compares (deny lists, per-user limits,
    group reservations): NFKC-normalised, case-folded, trimmed, and without the characters
    drawn as nothing (``_invisible``), so ``Mallory``, ``mallory ``, its fullwidth letters
    (U+FF4D...) and ``mallory`` + U+200B are one user. Only the policy sees it: the
    lease's metadata, status, events and reports keep the name as sent. A name of spaces
    (or invisible characters) alone is no name ('')."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", user).casefold())
    return "".join(c for c in folded if not _invisible(c)).strip()


# Characters that break or reorder a line where people read it: the line and paragraph
# separators and the bidirectional controls (embeddings, overrides, isolates, marks), which
# can make a terminal row or a portal cell read other than it is.
_LINE_BREAKS = frozenset([0x2028, 0x2029])
_BIDI_CONTROLS = frozenset([0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def control_problem(text: str) -> str | None:
    """Why ``text`` may not be shown to people (a user, a host, a label, a metadata key or
    value): it holds a C0 or C1 control character or DEL (NUL, line feed and tab
    included), which a terminal would act on (an escape sequence can retitle, clear or
    rewrite an operator's screen, a line break draws a row of its own); a line or
    paragraph separator; or a bidirectional control, which reorders what is shown. None
    when it holds none."""
    for char in text:
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return f"contains a control character (U+{code:04X})"
        if code in _LINE_BREAKS:
            return f"contains a line break (U+{code:04X})"
        if code in _BIDI_CONTROLS:
            return f"contains a bidirectional control character (U+{code:04X})"
    return None


def _label_text(value: str) -> str:
    if problem := text_problem(value) or control_problem(value):
        raise ValueError(problem)
    return value


# A tenant's name, an API key's label: shown in operators' tables and the portal.
Label = Annotated[str, StringConstraints(max_length=256), AfterValidator(_label_text)]


UserName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=USER_MAX_CHARS),
    AfterValidator(user_text("user")),
]
HostName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=USER_MAX_CHARS),
    AfterValidator(user_text("host")),
]


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as JSON text in PostgreSQL (``jsonb`` refuses the NUL
    character and an unpaired UTF-16 surrogate, which JSON's ``\\u`` escapes can carry),
    or None. Checked at the door so a client's metadata can never stall the audit trail."""
    if "\x00" in text:
        return "contains the NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (not valid Unicode)"
    return None


def check_metadata_text(value: object, *, shown: bool = False) -> None:
    """Raise ValueError when a key or string value of a metadata object has a
    ``text_problem`` (it could not be stored); with ``shown`` (a client's request: its
    metadata is shown to operators in ``seatlease status``, the portal and the reports)
    a ``control_problem`` too. (The audit function checks only the first: an event of an
    earlier release is stored, never dropped.)"""
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        for what, text in (("key", key), ("value", item)):
            if not isinstance(text, str):
                continue
            if problem := text_problem(text) or (shown and control_problem(text)) or None:
                raise ValueError(f"metadata {what} of {ascii(key)[:40]} {problem}")


def invalid_request(exc: ValidationError, what: str = "request") -> InvalidRequest:
    """A pydantic failure as the contract's 400: ``details`` names each field and its
    problem, and the message sums them up (``Invalid request: seats: ...``). A rule on the
    whole body (``field`` ``body``) is stated without a field name. One wording for the
    client functions and the admin actions (``what``: ``revoke request``, ...)."""
    details = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problem = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "value_error" and "error" in err.get("ctx", {}):
            problem = str(err["ctx"]["error"])  # our validators' sentence, no "Value error, "
        details.append({"field": where, "problem": problem})
    summary = "; ".join(
        d["problem"] if d["field"] == "body" else f"{d['field']}: {d['problem']}" for d in details
    )
    return InvalidRequest(f"Invalid {what}: {summary}.", details=details)
