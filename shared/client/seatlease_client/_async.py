"""``AsyncSeatClient``: the same client for asyncio; HTTP calls run in worker threads and
a held lease heartbeats from an asyncio task."""

from __future__ import annotations

import asyncio
import os
from types import TracebackType
from typing import Any

from seatlease_client._borrow import BorrowedSeat
from seatlease_client._client import SeatClient
from seatlease_client._lease import Lease, OnIdleWarning, OnLost, OnRegained, _Keeper


class AsyncSeatClient:
    """The same client for asyncio: each HTTP call runs in a worker thread
    (``asyncio.to_thread``) and a held lease heartbeats from an asyncio task.

        client = AsyncSeatClient(url, key, pinned_keys=[VENDOR_KEY_X])
        async with client.lease("cad", client_id="h1") as lease: ...

    ``on_lost``/``on_regained``/``on_idle_warning`` are plain functions, called from a
    worker thread. ``lease.touch()`` and ``with lease.busy():`` may be called from the
    event loop: they never wait on the network.
    """

    def __init__(self, base_url: str, api_key: str, **options: Any) -> None:
        self.sync = SeatClient(base_url, api_key, **options)

    def __repr__(self) -> str:
        return f"AsyncSeatClient({self.sync.base_url!r}, api_key=<hidden>)"

    async def acquire(self, license_id: str, client_id: str, **fields: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.acquire, license_id, client_id, **fields)

    async def heartbeat(self, license_id: str, session_id: str, **activity: Any) -> dict[str, Any]:
        """``SeatClient.heartbeat`` (``activity``: idle_seconds, busy as there)."""
        return await asyncio.to_thread(self.sync.heartbeat, license_id, session_id, **activity)

    async def release(self, license_id: str, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.release, license_id, session_id)

    async def borrow(
        self,
        license_id: str,
        client_id: str,
        seconds: int,
        *,
        path: str | os.PathLike[str],
        metadata: dict[str, Any] | None = None,
        **identity: Any,
    ) -> BorrowedSeat:
        """``SeatClient.borrow``: borrow, save to ``path``, verify (``identity``: user,
        host, entitlements, version, seats, request_id as there)."""
        return await asyncio.to_thread(
            self.sync.borrow, license_id, client_id, seconds, path=path, metadata=metadata,
            **identity,
        )  # fmt: skip

    async def load_borrowed(self, path: str | os.PathLike[str]) -> BorrowedSeat:
        """``SeatClient.load_borrowed``: the saved seat, verified offline (no request)."""
        return await asyncio.to_thread(self.sync.load_borrowed, path)

    async def close(self) -> None:
        """``SeatClient.close``: release every seat held, within ``release_timeout``."""
        await asyncio.to_thread(self.sync.release_all)

    async def return_early(self, seat: BorrowedSeat) -> dict[str, Any]:
        """``seat.return_early()`` without blocking the event loop."""
        return await asyncio.to_thread(seat.return_early)

    def lease(
        self,
        license_id: str,
        *,
        client_id: str,
        metadata: dict[str, Any] | None = None,
        lease_seconds: int | None = None,
        wait: bool = False,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        on_regained: OnRegained | None = None,
        on_idle_warning: OnIdleWarning | None = None,
        user: str | None = None,
        host: str | None = None,
        entitlements: list[str] | None = None,
        version: str | None = None,
        seats: int | None = None,
        fingerprint: str | bool | None = None,
    ) -> AsyncLeaseContext:
        """As ``SeatClient.lease`` (``wait`` waits in the license's queue when it has one;
        ``user`` and ``host`` name who asks, ``entitlements`` and ``version`` what the
        product needs, ``seats`` the lease's weight)."""
        lease = Lease(license_id, client_id, metadata)
        keeper = _Keeper(self.sync, lease, lease_seconds, on_lost, on_regained, on_idle_warning)
        keeper.identity = {
            "user": user, "host": host, "entitlements": entitlements, "version": version,
            "seats": seats, "fingerprint": self.sync._fingerprint(fingerprint),
        }  # fmt: skip
        return AsyncLeaseContext(keeper, wait, timeout)


class AsyncLeaseContext:
    """``async with client.lease(...) as lease``."""

    def __init__(self, keeper: _Keeper, wait: bool, timeout: float | None) -> None:
        self._keeper, self._wait, self._timeout = keeper, wait, timeout
        self._task: asyncio.Task[None] | None = None
        self._entered = False

    async def __aenter__(self) -> Lease:
        if self._entered:
            raise RuntimeError("a lease context can be entered once; call client.lease() again")
        self._entered = True
        keeper = self._keeper
        keeper.client._register(keeper)
        try:
            await asyncio.to_thread(keeper.acquire_first, self._wait, self._timeout)
        except BaseException:
            keeper.stop.set()  # a cancelled wait ends its thread; a late seat is released
            keeper.client._unregister(keeper)
            raise
        # A touch (from any thread) that can cancel an idle warning runs the next step now.
        woken = asyncio.Event()
        loop = asyncio.get_running_loop()
        keeper.notify = lambda: loop.call_soon_threadsafe(woken.set)
        self._task = asyncio.create_task(self._beat(woken), name="seatlease-heartbeat")
        return keeper.lease

    async def _beat(self, woken: asyncio.Event) -> None:
        keeper = self._keeper
        delay = keeper.beat_delay()
        while not keeper.stop.is_set():
            try:
                await asyncio.wait_for(woken.wait(), delay)
            except asyncio.TimeoutError:
                pass
            woken.clear()
            if keeper.stop.is_set():
                return
            delay = await asyncio.to_thread(keeper.step)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._keeper.stop.set()
        if self._task is not None:
            self._task.cancel()
        await asyncio.to_thread(self._keeper.client._close, self._keeper)
