"""Where a delivery may go: an endpoint's URL checked when it is created and again at each
send, after DNS, so that a webhook is never a way into the deployment's own network.

In the cloud a URL must be ``https`` to a name (or address) that resolves only to public
addresses: private (10/8, 172.16/12, 192.168/16, fc00::/7 with fd00:ec2::254), shared
(100.64/10), loopback, link-local (169.254/16 with the metadata server 169.254.169.254,
fe80::/10), multicast, reserved, unspecified (0.0.0.0, ::) and documentation addresses
are refused, and so are the metadata server's names, however they resolve. Every address
a name resolves to must pass (a name with one public and one private address is
refused). IPv4 inside IPv6 (``::ffff:10.0.0.1``, 6to4, NAT64) is judged as the IPv4.

The local stack (``local=True``: ``local_stack()``, i.e. the environment's
``SEATLEASE_LOCAL=1``, which ``seatlease local`` sets) also allows loopback, by
``http`` or ``https``: ``http://127.0.0.1:PORT/...``, ``http://localhost:PORT/...``,
``http://[::1]:PORT/...``, for a receiver on the developer's machine. Nothing else
changes: a private address is refused there too.

No user name or password in the URL (it would be logged and shown), no scheme but http(s),
no host spelt as a bare number (``http://2130706433/`` is 127.0.0.1 to the resolver).

``resolve_for_send`` repeats the check at each send and returns the one address the
connection must go to: the sender connects to that IP (no second DNS lookup, which a
rebinding name could answer differently), sends the URL's host as the TLS SNI and
``Host`` and verifies the certificate for it, and follows no redirect.

``resolve``: the seam for DNS (``system_resolve`` by default; tests pass their own).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable
from urllib.parse import quote, urlsplit, urlunsplit

from seatlease.errors import InvalidRequest

LOCAL_ENV = "SEATLEASE_LOCAL"
MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
# The cloud metadata server's names (GCP; AWS and Azure use the address alone): refused
# before any lookup, whatever they resolve to.
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
LOOPBACK_NAMES = frozenset({"localhost"})
# IPv6 prefixes that carry an IPv4 address in their low 32 bits (RFC 6052 NAT64).
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IETF_PROTOCOL = ipaddress.IPv4Network("192.0.0.0/24")
# What a path and a query keep as they are (RFC 3986's sub-delims, ':' and '@', and '%'
# of an escape already there); the rest is percent-encoded as UTF-8.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]


class HostNotResolved(InvalidRequest):
    """The URL's host has no address now. At creation that refuses the URL; at a send it
    is a failed attempt to retry (the DNS may answer later), like a refused connection."""


def local_stack() -> bool:
    """Whether this process is the local stack (``SEATLEASE_LOCAL=1``): loopback allowed."""
    return os.environ.get(LOCAL_ENV, "").strip() == "1"


def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives for ``host`` (TCP), in its order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    found: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # a scope id (fe80::1%eth0) is not an address
        if address not in found:
            found.append(address)
    return found


def check_url(url: str, *, local: bool, resolve: Resolver = system_resolve) -> str:
    """The URL normalised (scheme and host in lower case, the host in IDNA, a default
    port dropped, no fragment, ``/`` for an empty path), or InvalidRequest with
    ``details=[{"field": "url", "problem": ...}]`` saying why it is refused."""
    normalised, _host, _port, _addresses = _checked(url, local, resolve)
    return normalised


def resolve_for_send(
    url: str, local: bool, *, resolve: Resolver = system_resolve
) -> tuple[str, str, int]:
    """``(ip, host, port)`` for one send: the same check as ``check_url``, now; connect to
    ``ip`` (an IPv4 one when the name has both) and send ``host`` as SNI and ``Host``.
    Raises InvalidRequest when the URL is refused now (HostNotResolved when its name has
    no address)."""
    _normalised, host, port, addresses = _checked(url, local, resolve)
    # IPv4 first: Cloud Functions' egress has no IPv6 by default, and a local receiver
    # bound to 127.0.0.1 is not at ::1, whichever order the resolver gave.
    chosen = min(addresses, key=lambda a: a.version)
    return str(chosen), host, port


def refused(problem: str, error: type[InvalidRequest] = InvalidRequest) -> InvalidRequest:
    return error(f"Invalid url: {problem}.", details=[{"field": "url", "problem": problem}])


def _checked(url: str, local: bool, resolve: Resolver) -> tuple[str, str, int, list[Address]]:
    if not isinstance(url, str) or not url:
        raise refused("is empty")
    if len(url) > MAX_URL_LENGTH:
        raise refused(f"is longer than {MAX_URL_LENGTH} characters")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise refused("holds a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise refused(f"cannot be read ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise refused("must be an https URL" + (" (or http to loopback)" if local else ""))
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise refused("must not hold a user name or password")
    if not parts.hostname:
        raise refused("has no host")
    host, literal = _host_of(parts.hostname)
    if port == 0:
        raise refused("has port 0")
    port = port if port is not None else DEFAULT_PORTS[scheme]
    loopback_name = host in LOOPBACK_NAMES or host.endswith(".localhost")
    if host in METADATA_NAMES:
        raise refused(f"{host} is the cloud metadata server")
    if loopback_name and not local:
        raise refused(f"{host} is a loopback address")
    if literal is not None:
        addresses: list[Address] = [literal]
    else:
        if scheme == "http" and not (local and loopback_name):
            raise refused(_needs_https(local))
        found = [_parse_address(text) for text in resolve(host, port)]
        addresses = [a for a in found if a is not None]
        if not addresses:
            raise refused(f"{host} does not resolve to an address", HostNotResolved)
    for address in addresses:
        if problem := _address_problem(address, local):
            shown = host if literal is not None else f"{host} resolves to {address}, which"
            raise refused(f"{shown} is {problem}")
    if scheme == "http" and not all(_judged(a).is_loopback for a in addresses):
        raise refused(_needs_https(local))
    shown_host = f"[{host}]" if isinstance(literal, ipaddress.IPv6Address) else host
    netloc = shown_host if port == DEFAULT_PORTS[scheme] else f"{shown_host}:{port}"
    # (a path or query of other than ASCII is sent percent-encoded, UTF-8: what the
    # receiver's server reads, and what http.client can write; one already encoded stays)
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    query = quote(parts.query, safe=_QUERY_SAFE)
    normalised = urlunsplit((scheme, netloc, path, query, ""))
    return normalised, host, port, addresses


def _needs_https(local: bool) -> str:
    if local:
        return "must be https (http only to 127.0.0.1, localhost or [::1] on the local stack)"
    return "must be https"


def _host_of(hostname: str) -> tuple[str, Address | None]:
    """The host in lower case (IDNA for a name) and its address when it is one."""
    if "%" in hostname:  # fe80::1%eth0: an interface of the sender's own machine
        raise refused("has a zone id in its host")
    literal = _parse_address(hostname)
    if literal is not None:
        return str(literal), literal
    try:
        name = hostname.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise refused("has a host name that is not a valid name") from None
    labels = name.split(".")
    if not name or not all(_LABEL.match(label) for label in labels):
        raise refused("has a host name that is not a valid name")
    if _NUMERIC_LABEL.match(labels[-1]):
        # 2130706433, 0x7f.1 or 127.1 are addresses to the resolver, not names: refused
        # rather than judged by what a resolver makes of them.
        raise refused("has a host that is neither a name nor a dotted address")
    return name, None


def _parse_address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _judged(address: Address) -> Address:
    """The address whose kind counts: the IPv4 inside an IPv6 that carries one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if any(address in net for net in _NAT64):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _address_problem(address: Address, local: bool) -> str | None:
    """Why a delivery must not go to ``address``, or None."""
    judged = _judged(address)
    if judged.is_unspecified:
        return "an unspecified address"
    if judged.is_loopback:
        return None if local else "a loopback address"
    if str(judged) in ("169.254.169.254", "fd00:ec2::254"):
        return "the cloud metadata server"
    if judged.is_link_local:
        return "a link-local address"
    if judged.is_multicast:
        return "a multicast address"
    if isinstance(judged, ipaddress.IPv6Address) and judged.is_site_local:
        return "a private address"  # fec0::/10: the site-local range before fc00::/7
    if isinstance(judged, ipaddress.IPv4Address) and judged in _IETF_PROTOCOL:
        return "a special-purpose address"  # 192.0.0.0/24 (RFC 6890), as a whole
    if isinstance(address, ipaddress.IPv6Address) and address.teredo is not None:
        return "a Teredo tunnel address"
    if judged.is_reserved:
        return "a reserved address"
    if judged.is_private:
        return "a private address"
    if not judged.is_global:
        return "not a public address"
    return None
