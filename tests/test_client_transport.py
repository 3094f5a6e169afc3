"""The Python client's structure: its modules import each other without a circle (not even
one only a type checker follows), and it talks to the network through one seam, a
``Transport``, whose default is HTTP over urllib. Another transport (here the real
functions called in-process through WSGI) carries the same calls, token checks included,
and a transport's failures become the same typed errors as HTTP's."""

from __future__ import annotations

import ast
import http.client
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from http_support import Tenant, new_license
from werkzeug.test import Client

from seatlease.api import runtime, tokens
from seatlease_cli import devserver
from seatlease_client import BackendUnavailable, InvalidResponse, SeatClient, ServiceError
from seatlease_client._http import HttpTransport
from seatlease_client._transport import MAX_ANSWER, Redirected, TooLarge

PACKAGE = "seatlease_client"
SOURCE = Path(__file__).resolve().parent.parent / "shared" / "client" / PACKAGE
# Modules every other one may use and which use none of the client's own.
LEAVES = {"_claims", "_transport", "_errors", "_ed25519", "_machine", "_version"}


def module_imports() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports anywhere in its
    source: at the top, inside a function, or under ``if TYPE_CHECKING``.
    ``seatlease_client`` itself (its ``__init__``) is a module like the others."""
    modules = {p.stem for p in SOURCE.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for path in SOURCE.glob("*.py"):
        name = PACKAGE if path.stem == "__init__" else path.stem
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == PACKAGE:
                        found.add(PACKAGE)
                    elif alias.name.startswith(PACKAGE + "."):
                        found.add(alias.name.split(".")[1])
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ._x import y
                    base = PACKAGE + ("." + base if base else "")
                if base == PACKAGE:  # a module of the package, else a name of __init__
                    found |= {a.name if a.name in modules else PACKAGE for a in node.names}
                elif base.startswith(PACKAGE + "."):
                    found.add(base.split(".")[1])
        graph[name] = found - {name}
    return graph


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in ``graph`` (its modules in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_cycle_finder_finds_a_type_only_circle() -> None:
    assert a_cycle({"_client": {"_lease"}, "_lease": {"_claims"}, "_claims": set()}) is None
    circle = a_cycle({"_client": {"_lease"}, "_lease": {"_client"}})
    assert circle == ["_client", "_lease", "_client"]


def test_the_client_modules_import_each_other_without_a_circle() -> None:
    graph = module_imports()
    assert {"_client", "_lease", "_borrow", "_verify", "_claims", "_transport"} <= set(graph)
    assert a_cycle(graph) is None, " -> ".join(a_cycle(graph) or [])
    # the circle this replaced: the lease and the borrowed seat named the client for types
    assert "_client" not in graph["_lease"] | graph["_borrow"]
    for leaf in LEAVES:
        assert graph[leaf] == set(), (leaf, graph[leaf])


# -- the transport seam --------------------------------------------------------------


class InProcess:
    """A transport that calls the real functions (acquire, heartbeat, release, keys)
    in-process through WSGI: no socket, no urllib. Records what it carried."""

    def __init__(self) -> None:
        self.wsgi = Client(devserver.create_app(["acquire", "heartbeat", "release", "keys"]))
        self.carried: list[tuple[str, str]] = []

    def exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> tuple[int, Any, bytes]:
        path = url.split("://", 1)[1].partition("/")[2]
        self.carried.append((method, "/" + path))
        answer = self.wsgi.open("/" + path, method=method, headers=dict(headers), data=body)
        return answer.status_code, answer.headers, answer.get_data()


def test_another_transport_carries_every_call_and_its_checks(acme: Tenant) -> None:
    new_license(acme, "lic", seats=1)
    transport = InProcess()
    pinned = [key["x"] for key in tokens.keyring().jwks()["keys"]]
    # A host that resolves nowhere: only the transport can have reached the functions.
    client = SeatClient(
        "https://seatlease.invalid", acme.key, pinned_keys=pinned, transport=transport,
        handle_sigterm=False,
    )  # fmt: skip
    with client.lease("lic", client_id="ws-1") as lease:
        assert lease.token  # verified against the JWKS the transport fetched
        [held] = runtime.seat_engine().live_leases(acme.tenant_id, "lic")
        assert held["session_id"] == lease.session_id
    assert runtime.seat_engine().live_leases(acme.tenant_id, "lic") == []
    assert transport.carried[0] == ("POST", "/acquire")
    assert ("GET", "/keys") in transport.carried
    assert transport.carried[-1] == ("POST", "/release")


def test_the_default_transport_is_http_over_urllib() -> None:
    client = SeatClient("http://127.0.0.1:9", "k", insecure_skip_verify=True)
    assert isinstance(client._transport, HttpTransport)


class Failing:
    """A transport whose every exchange ends in ``failure``."""

    def __init__(self, failure: BaseException) -> None:
        self.failure = failure
        self.calls = 0

    def exchange(self, *args: Any) -> tuple[int, Any, bytes]:
        self.calls += 1
        raise self.failure


@pytest.mark.parametrize(
    ("failure", "kind", "code", "calls"),
    [
        (ConnectionRefusedError("refused"), BackendUnavailable, "network_error", 3),
        (http.client.IncompleteRead(b"{"), BackendUnavailable, "network_error", 3),
        (Redirected(302, "https://elsewhere.test/"), ServiceError, "redirected", 1),
        (TooLarge(f"over {MAX_ANSWER}"), InvalidResponse, "invalid_response", 1),
    ],
)
def test_a_transports_failure_is_the_same_typed_error(failure, kind, code, calls) -> None:
    transport = Failing(failure)
    client = SeatClient(
        "https://seatlease.invalid", "k", insecure_skip_verify=True, transport=transport,
        retries=2, backoff=0.01, handle_sigterm=False,
    )  # fmt: skip
    with pytest.raises(kind) as raised:
        client.acquire("lic", "ws-1")
    assert raised.value.code == code
    assert transport.calls == calls  # no answer is retried; a wrong one is not
