"""Issue 31, item 10: the local stack serves the operator functions (admin, reaper,
audit) without authentication, so it answers them only for a loopback ``Host`` and a
loopback (or no) ``Origin``: a DNS-rebinding page cannot create admin keys. Served by
``seatlease_cli.devserver`` on a real werkzeug server, on the real Redis and PostgreSQL."""

from __future__ import annotations

import http.client
import json

import pytest
from http_support import serving

from seatlease.records import store
from seatlease_cli import devserver

CREATE = json.dumps({"action": "apikey.create", "tenant_id": "acme"}).encode()


@pytest.fixture(scope="module")
def app():
    return devserver.create_app(["admin", "acquire", "reaper"])


def post(url: str, path: str, headers: dict[str, str], body: bytes = CREATE) -> tuple[int, dict]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", path, skip_host=True)
    for name, value in {"Content-Type": "application/json", **headers}.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    answer = response.status, json.loads(response.read() or b"{}")
    conn.close()
    return answer


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {"Host": "evil.example:8080"},
        {"Host": "127.0.0.1.evil.example"},
        {"Host": "192.168.1.20:8080"},
        {"Host": "127.0.0.1:8080", "Origin": "http://evil.example"},
        {"Host": "localhost", "Origin": "null"},
        {},
    ],
)
def test_a_rebound_name_or_a_foreign_origin_is_403_and_changes_nothing(
    redis_url, database_url, app, headers
) -> None:
    store.create_tenant("acme")
    with serving(app, quiet=True) as url:
        status, body = post(url, "/admin", headers)
        assert status == 403 and body["error"]["code"] == "forbidden"
        assert post(url, "/reaper", headers, b"")[0] == 403
    assert store.list_api_keys("acme") == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "127.0.0.1:8080"},
        {"Host": "localhost:8080", "Origin": "http://localhost:8080"},
        {"Host": "[::1]:8080"},
        {"Host": "127.0.0.2"},
    ],
)
def test_loopback_hosts_and_origins_are_served(redis_url, database_url, app, headers) -> None:
    store.create_tenant("acme")
    with serving(app, quiet=True) as url:
        status, body = post(url, "/admin", headers)
    assert status == 201 and body["key"].startswith(body["prefix"])


def test_the_seat_functions_need_their_api_key_whatever_the_host(
    redis_url, database_url, app
) -> None:
    with serving(app, quiet=True) as url:
        status, body = post(url, "/acquire", {"Host": "licenses.example.com"}, b"{}")
    assert status == 401 and body["error"]["code"] == "unauthenticated"
