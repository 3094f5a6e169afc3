"""Ed25519 signature verification in pure Python (RFC 8032, section 5.1.7), so that a
default install verifies the service's signed tokens with the standard library only.

Verification only (the client never signs): a public key is 32 bytes, a signature 64.
It follows RFC 8032's reference code: the point encodings must decode (``y`` below the
field's prime), ``S`` must be below the group order ``L`` (no malleable signatures) and
``[S]B = R + [k]A`` is checked without the cofactor, as OpenSSL and pyca/cryptography
do. Not constant-time, which verification with public data does not need; a few
milliseconds per token, for a handful of tokens a minute.
"""

from __future__ import annotations

import hashlib

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

_Point = tuple  # extended homogeneous coordinates (X, Y, Z, T): x = X/Z, y = Y/Z, xy = T/Z


def _add(p: _Point, q: _Point) -> _Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _double(p: _Point) -> _Point:
    a = p[0] * p[0] % _P
    b = p[1] * p[1] % _P
    c = 2 * p[2] * p[2] % _P
    h = a + b
    e = h - (p[0] + p[1]) * (p[0] + p[1]) % _P
    g = a - b
    f = c + g
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _multiply(scalar: int, point: _Point) -> _Point:
    result: _Point = (0, 1, 1, 0)  # the neutral element
    while scalar > 0:
        if scalar & 1:
            result = _add(result, point)
        point = _double(point)
        scalar >>= 1
    return result


def _same(p: _Point, q: _Point) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _decode(encoded: bytes) -> _Point | None:
    if len(encoded) != 32:
        return None
    y = int.from_bytes(encoded, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
assert _GX is not None
_BASE: _Point = (_GX, _GY, 1, _GX * _GY % _P)


def is_public_key(public: bytes) -> bool:
    """Whether ``public`` is the encoding of a point of the curve (32 bytes)."""
    return _decode(bytes(public)) is not None


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``public``'s Ed25519 signature of ``message``."""
    public, signature = bytes(public), bytes(signature)
    if len(public) != 32 or len(signature) != 64:
        return False
    a = _decode(public)
    r = _decode(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    digest = hashlib.sha512(signature[:32] + public + message).digest()
    k = int.from_bytes(digest, "little") % _L
    return _same(_multiply(s, _BASE), _add(r, _multiply(k, a)))


# libsodium's list of the encodings of the points of small order (``has_small_order`` in
# its ed25519 ref10), compared with the top bit of the last byte masked off.
_SMALL_ORDER = frozenset(
    bytes.fromhex(h)
    for h in (
        "01" + "00" * 31,  # the identity
        "00" * 32,
        "ec" + "ff" * 30 + "7f",  # p - 1
        "ed" + "ff" * 30 + "7f",  # p
        "ee" + "ff" * 30 + "7f",  # p + 1
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    )
)
_IDENTITY: _Point = (0, 1, 1, 0)


def has_small_order(public: bytes) -> bool:
    """Whether ``public`` encodes a point of small order (``[8]A`` is the identity): a
    key anyone can "sign" for, never a vendor's. libsodium's list of encodings first,
    then the point itself."""
    public = bytes(public)
    if len(public) != 32:
        return False
    if public[:31] + bytes([public[31] & 0x7F]) in _SMALL_ORDER:
        return True
    point = _decode(public)
    return point is not None and _same(_multiply(8, point), _IDENTITY)
