"""Where a webhook may be sent (seatlease.webhooks.urls): every kind of address that
reaches the deployment's own network is refused, before and after DNS, in the cloud and on
the local stack (which allows loopback alone); a public https URL passes, normalised.

DNS goes through the module's resolver seam: each test passes a resolver answering from
its own table (no hosts file, no network), and one test the system's, for localhost."""

from __future__ import annotations

import pytest

from seatlease.errors import InvalidRequest
from seatlease.webhooks import urls
from seatlease.webhooks.urls import HostNotResolved, check_url, resolve_for_send

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"


def resolver(table: dict[str, list[str]]):
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return list(table.get(host, []))

    resolve.asked = asked
    return resolve


PUBLIC_DNS = resolver(
    {
        "hooks.example.com": [PUBLIC_V4, PUBLIC_V6],
        "xn--bcher-kva.example": [PUBLIC_V4],
        "ten.example.com": ["10.1.2.3"],
        "mixed.example.com": [PUBLIC_V4, "192.168.1.20"],
        "metadata-alias.example.com": ["169.254.169.254"],
        "loop.example.com": ["127.0.0.1"],
        "v6loop.example.com": ["::1"],
        "mapped.example.com": ["::ffff:10.0.0.7"],
        "linklocal6.example.com": ["fe80::1"],
        "ula.example.com": ["fd12:3456::1"],
        "multicast.example.com": ["239.1.2.3"],
        "cgnat.example.com": ["100.64.0.9"],
        "zero.example.com": ["0.0.0.0"],
        "localhost": ["127.0.0.1", "::1"],
    }
)


def problem_of(url: str, *, local: bool = False, resolve=PUBLIC_DNS) -> str:
    with pytest.raises(InvalidRequest) as caught:
        check_url(url, local=local, resolve=resolve)
    details = caught.value.fields["details"]
    assert len(details) == 1 and details[0]["field"] == "url", details
    assert caught.value.message == f"Invalid url: {details[0]['problem']}."
    return details[0]["problem"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://10.1.2.3/hook", "10.1.2.3 is a private address"),
        ("https://10.255.255.255/hook", "private address"),
        ("https://172.16.0.1/hook", "172.16.0.1 is a private address"),
        ("https://172.31.255.254/hook", "private address"),
        ("https://192.168.1.1/hook", "192.168.1.1 is a private address"),
        ("https://127.0.0.1/hook", "127.0.0.1 is a loopback address"),
        ("https://127.8.9.10:8443/hook", "loopback address"),
        ("https://[::1]/hook", "::1 is a loopback address"),
        ("https://[fe80::1]/hook", "fe80::1 is a link-local address"),
        ("https://169.254.169.254/computeMetadata/v1/", "the cloud metadata server"),
        ("https://169.254.10.10/", "link-local address"),
        ("https://[fd00:ec2::254]/", "the cloud metadata server"),
        ("https://metadata.google.internal/computeMetadata/v1/", "the cloud metadata server"),
        ("https://METADATA.google.internal./x", "the cloud metadata server"),
        ("https://metadata/x", "the cloud metadata server"),
        ("https://0.0.0.0/hook", "0.0.0.0 is an unspecified address"),
        ("https://[::]/hook", "unspecified address"),
        ("https://224.0.0.1/hook", "a multicast address"),
        ("https://[ff02::1]/hook", "multicast address"),
        ("https://240.0.0.1/hook", "a reserved address"),
        ("https://100.64.1.1/hook", "not a public address"),
        ("https://[::ffff:10.0.0.1]/hook", "private address"),
        ("https://[::ffff:127.0.0.1]/hook", "loopback address"),
        ("https://[2002:a00:1::]/hook", "private address"),  # 6to4 of 10.0.0.1
        ("https://[64:ff9b::a9fe:a9fe]/hook", "the cloud metadata server"),  # NAT64
        ("https://localhost/hook", "localhost is a loopback address"),
        ("https://app.localhost/hook", "loopback address"),
    ],
)
def test_addresses_of_the_deployments_own_network_are_refused(url: str, problem: str) -> None:
    assert problem in problem_of(url)


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("ten.example.com", "ten.example.com resolves to 10.1.2.3, which is a private address"),
        ("mixed.example.com", "resolves to 192.168.1.20, which is a private address"),
        ("metadata-alias.example.com", "resolves to 169.254.169.254, which is the cloud"),
        ("loop.example.com", "resolves to 127.0.0.1, which is a loopback address"),
        ("v6loop.example.com", "resolves to ::1, which is a loopback address"),
        ("mapped.example.com", "which is a private address"),
        ("linklocal6.example.com", "which is a link-local address"),
        ("ula.example.com", "which is a private address"),
        ("multicast.example.com", "which is a multicast address"),
        ("cgnat.example.com", "which is not a public address"),
        ("zero.example.com", "which is an unspecified address"),
    ],
)
def test_a_name_resolving_to_any_such_address_is_refused(host: str, problem: str) -> None:
    assert problem in problem_of(f"https://{host}/hook")


def test_a_name_that_does_not_resolve_is_refused_and_says_so() -> None:
    with pytest.raises(HostNotResolved) as caught:
        check_url("https://nowhere.example.com/hook", local=False, resolve=PUBLIC_DNS)
    assert caught.value.fields["details"][0]["problem"] == (
        "nowhere.example.com does not resolve to an address"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://hooks.example.com/hook", "must be https"),
        ("http://93.184.215.14/hook", "must be https"),
        ("ftp://hooks.example.com/hook", "must be an https URL"),
        ("file:///etc/passwd", "must be an https URL"),
        ("gopher://hooks.example.com:70/", "must be an https URL"),
        ("hooks.example.com/hook", "must be an https URL"),
        ("https://user:pw@hooks.example.com/hook", "must not hold a user name or password"),
        ("https://user@hooks.example.com/hook", "must not hold a user name or password"),
        ("https://hooks.example.com@10.1.2.3/hook", "must not hold a user name or password"),
        ("https:///hook", "has no host"),
        ("https://2130706433/hook", "neither a name nor a dotted address"),
        ("https://0x7f.1/hook", "neither a name nor a dotted address"),
        ("https://127.1/hook", "neither a name nor a dotted address"),
        ("https://exa_mple.com/hook", "not a valid name"),
        ("https://hooks.example.com:0/hook", "port 0"),
        ("https://hooks.example.com:99999/hook", "cannot be read"),
        ("https://hooks.example.com/a b", "space or a control character"),
        ("https://[fe80::1%25eth0]/hook", "zone id"),
        ("", "is empty"),
        ("https://hooks.example.com/" + "a" * 2048, "longer than 2048"),
    ],
)
def test_urls_that_are_not_plain_public_https_are_refused(url: str, problem: str) -> None:
    assert problem in problem_of(url)


def test_a_non_default_scheme_is_refused_on_the_local_stack_too() -> None:
    assert "must be an https URL (or http to loopback)" in problem_of(
        "ws://127.0.0.1:9000/hook", local=True
    )


def test_a_public_https_url_passes_normalised() -> None:
    assert check_url("https://hooks.example.com/hook?x=1#part", local=False,
                     resolve=PUBLIC_DNS) == "https://hooks.example.com/hook?x=1"  # fmt: skip
    assert check_url("HTTPS://Hooks.Example.COM:443", local=False, resolve=PUBLIC_DNS) == (
        "https://hooks.example.com/"
    )
    assert check_url("https://hooks.example.com:8443/h", local=False, resolve=PUBLIC_DNS) == (
        "https://hooks.example.com:8443/h"
    )
    assert check_url("https://b\u00fccher.example/h", local=False, resolve=PUBLIC_DNS) == (
        "https://xn--bcher-kva.example/h"
    )
    assert check_url(f"https://{PUBLIC_V4}/h", local=False, resolve=PUBLIC_DNS) == (
        f"https://{PUBLIC_V4}/h"
    )
    assert check_url(f"https://[{PUBLIC_V6.upper()}]:8443/h", local=False) == (
        f"https://[{PUBLIC_V6}]:8443/h"
    )


def test_send_goes_to_the_checked_address_with_the_name_for_tls() -> None:
    dns = resolver({"hooks.example.com": [PUBLIC_V4]})
    assert resolve_for_send("https://hooks.example.com/hook", False, resolve=dns) == (
        PUBLIC_V4, "hooks.example.com", 443)  # fmt: skip
    assert resolve_for_send("https://hooks.example.com:8443/h", False, resolve=dns) == (
        PUBLIC_V4, "hooks.example.com", 8443)  # fmt: skip
    assert dns.asked == [("hooks.example.com", 443), ("hooks.example.com", 8443)]


def test_send_prefers_an_ipv4_address_whatever_the_resolvers_order() -> None:
    dns = resolver({"both.example.com": [PUBLIC_V6, PUBLIC_V4], "six.example.com": [PUBLIC_V6]})
    assert resolve_for_send("https://both.example.com/", False, resolve=dns)[0] == PUBLIC_V4
    assert resolve_for_send("https://six.example.com/", False, resolve=dns)[0] == PUBLIC_V6
    local = resolver({"localhost": ["::1", "127.0.0.1"]})
    assert resolve_for_send("http://localhost:8765/", True, resolve=local)[0] == "127.0.0.1"


def test_send_checks_again_so_a_name_rebound_to_a_private_address_is_refused() -> None:
    table = {"rebind.example.com": [PUBLIC_V4]}
    dns = resolver(table)
    url = check_url("https://rebind.example.com/hook", local=False, resolve=dns)
    table["rebind.example.com"] = ["10.0.0.5"]  # the name's owner changes its answer
    with pytest.raises(InvalidRequest, match=r"resolves to 10\.0\.0\.5, which is a private"):
        resolve_for_send(url, False, resolve=dns)
    table["rebind.example.com"] = []
    with pytest.raises(HostNotResolved):
        resolve_for_send(url, False, resolve=dns)


def test_the_cloud_never_asks_dns_for_a_url_refused_by_its_form() -> None:
    dns = resolver({})
    for url in ("http://hooks.example.com/", "https://localhost/", "https://u@x.example/"):
        with pytest.raises(InvalidRequest):
            check_url(url, local=False, resolve=dns)
    assert dns.asked == []


@pytest.mark.parametrize(
    ("url", "normalised"),
    [
        ("http://127.0.0.1:8765/hook", "http://127.0.0.1:8765/hook"),
        ("http://localhost:8765/hook", "http://localhost:8765/hook"),
        ("http://[::1]:8765/hook", "http://[::1]:8765/hook"),
        ("https://127.0.0.1:8443/hook", "https://127.0.0.1:8443/hook"),
        ("https://hooks.example.com/hook", "https://hooks.example.com/hook"),
    ],
)
def test_the_local_stack_allows_loopback(url: str, normalised: str) -> None:
    assert check_url(url, local=True, resolve=PUBLIC_DNS) == normalised


def test_the_local_stack_resolves_localhost_with_the_system_resolver() -> None:
    ip, host, port = resolve_for_send("http://localhost:8765/hook", True)
    assert (host, port) == ("localhost", 8765) and ip in ("127.0.0.1", "::1")  # as /etc/hosts says
    assert resolve_for_send("http://127.0.0.1:8765/hook", True) == ("127.0.0.1", "127.0.0.1", 8765)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        # The example: refused with a clear error on the local stack too.
        ("http://10.1.2.3/hook", "10.1.2.3 is a private address"),
        ("http://192.168.0.10:8080/hook", "private address"),
        ("http://169.254.169.254/", "the cloud metadata server"),
        ("http://hooks.example.com/hook", "http only to 127.0.0.1, localhost or [::1]"),
        ("http://93.184.215.14/hook", "http only to 127.0.0.1, localhost or [::1]"),
        ("http://ten.example.com/hook", "http only to 127.0.0.1"),
        ("https://ten.example.com/hook", "resolves to 10.1.2.3, which is a private address"),
        ("https://metadata.google.internal/", "the cloud metadata server"),
    ],
)
def test_the_local_stack_refuses_everything_else(url: str, problem: str) -> None:
    assert problem in problem_of(url, local=True)


def test_local_stack_is_the_environment_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEATLEASE_LOCAL", raising=False)
    assert urls.local_stack() is False
    monkeypatch.setenv("SEATLEASE_LOCAL", "0")
    assert urls.local_stack() is False
    monkeypatch.setenv("SEATLEASE_LOCAL", "1")
    assert urls.local_stack() is True
