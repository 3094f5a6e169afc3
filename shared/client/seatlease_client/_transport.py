"""The seam between the client and the network: ``SeatClient`` makes every request (the
seat calls and the JWKS fetch) through a ``Transport``, one exchange at a time. The
default is ``_http.HttpTransport`` (urllib: the environment's proxies, redirects refused,
the whole exchange bounded by a watchdog); another can be given with
``SeatClient(..., transport=...)``. What the client does with an answer (its typed errors,
retries, token checks, releasing a refused grant) is the same whatever carried it. This
module imports nothing of the client, so the client and every transport depend on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# The largest answer a transport reads (the service's are a few kilobytes): a bigger one
# is not the service's, and must not fill the product's memory.
MAX_ANSWER = 1 << 20

# (status, headers, body) of one completed exchange. ``headers``: anything whose
# ``get(name)`` reads a header case-insensitively (``http.client.HTTPMessage`` does), or
# None.
Answer = tuple[int, Any, bytes]


class TooLarge(Exception):
    """The answer is larger than ``MAX_ANSWER``."""


class Redirected(Exception):
    """The answer was a redirect (3xx), which the client never follows."""

    def __init__(self, status: int, location: str | None) -> None:
        super().__init__(f"{status} redirect to {location}")
        self.status, self.location = status, location


class Transport(Protocol):
    """Carries one request and its whole answer."""

    def exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> Answer:
        """The answer to ``method url`` completed within ``timeout`` seconds (name
        resolution, connect, headers and body), whatever its status. Raises ``Redirected``
        for a 3xx (never followed: the ``Authorization`` header must not go to another
        host), ``TooLarge`` for a body over ``MAX_ANSWER`` bytes, and ``OSError`` or
        ``http.client.HTTPException`` when no complete answer came in time: the client
        treats that as the service being unreachable (``BackendUnavailable``, retried)."""
        ...
