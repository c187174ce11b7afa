"""The receiver-URL policy (``webhooks/url_policy.py``): which URLs may be registered and called.

No test here asks a real DNS server: host names other than ``localhost`` are answered by a fake
``getaddrinfo`` on the running event loop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from commerce_api.webhooks.url_policy import (
    MAX_URL_LENGTH,
    Target,
    UnsafeURL,
    check_url,
    is_public,
    redact_query,
    resolve,
)

AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
FakeResolver = Callable[..., Coroutine[Any, Any, list[AddrInfo]]]

# Every spelling of a non-public address that a receiver URL might use.
NON_PUBLIC_URLS = [
    "https://127.0.0.1/hook",
    "https://127.0.0.1:8443/hook",
    "https://127.1/hook",
    "https://127.0.1/hook",
    "https://0x7f000001/hook",
    "https://0x7f.1/hook",
    "https://2130706433/hook",
    "https://017700000001/hook",
    "https://0177.0.0.1/hook",
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:7f00:1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[2002:7f00:1::]/hook",
    "https://[fe80::1]/hook",
    "https://[fc00::1]/hook",
    "https://[ff02::1]/hook",
    "https://[::]/hook",
    "https://0.0.0.0/hook",
    "https://0/hook",
    "https://10.0.0.1/hook",
    "https://172.16.0.1/hook",
    "https://192.168.1.10/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/hook",
    "https://224.0.0.1/hook",
    "https://239.255.255.250/hook",
    "https://240.0.0.1/hook",
    "https://255.255.255.255/hook",
    "https://192.0.2.1/hook",
    "https://198.18.0.1/hook",
]

MALFORMED_URLS = [
    ("ftp://example.com/hook", "absolute http(s) URL"),
    ("example.com/hook", "absolute http(s) URL"),
    ("//example.com/hook", "absolute http(s) URL"),
    ("https:///hook", "absolute http(s) URL"),
    ("javascript:alert(1)", "absolute http(s) URL"),
    ("", "absolute http(s) URL"),
    ("https://user:pass@example.com/hook", "credentials"),
    ("https://user@example.com/hook", "credentials"),
    ("https://:pass@example.com/hook", "credentials"),
    ("https://example.com/hook#section", "fragment"),
    ("https://example.com:0/hook", "port 0"),
    ("https://example.com:65536/hook", "not a valid URL"),
    ("https://example.com:port/hook", "not a valid URL"),
    ("https://[::1/hook", "not a valid URL"),
]


def fake_resolver(*addresses: str, calls: list[tuple[str, object]] | None = None) -> FakeResolver:
    """A ``loop.getaddrinfo`` stand-in answering every host with ``addresses``."""

    async def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> Any:
        if calls is not None:
            calls.append((host, port))
        infos: list[AddrInfo] = []
        for address in addresses:
            if ":" in address:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, 443, 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 443)))
        return infos

    return getaddrinfo


def use_resolver(monkeypatch: pytest.MonkeyPatch, resolver: FakeResolver) -> None:
    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolver)


# --- check_url ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/webhooks",
        "https://example.com",
        "https://hooks.example.com:8443/a/b?x=1&y=2",
        "https://93.184.216.34/hook",
        "https://[2606:4700:4700::1111]/hook",
    ],
)
def test_a_public_https_url_passes_and_is_returned_unchanged(url: str) -> None:
    assert check_url(url, allow_private=False) == url


@pytest.mark.parametrize("url", NON_PUBLIC_URLS)
def test_a_non_public_address_is_refused_in_any_spelling(url: str) -> None:
    with pytest.raises(UnsafeURL, match="non-public address"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("https://0x7f000001/", "127.0.0.1"),
        ("https://2130706433/", "127.0.0.1"),
        ("https://127.1/", "127.0.0.1"),
        ("https://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
    ],
)
def test_the_refusal_names_the_address_the_spelling_stands_for(url: str, address: str) -> None:
    with pytest.raises(UnsafeURL) as caught:
        check_url(url, allow_private=False)
    assert f"({address})" in str(caught.value)


@pytest.mark.parametrize(
    "url", ["http://example.com/hook", "http://93.184.216.34/hook", "http://127.0.0.1/hook"]
)
def test_plain_http_is_refused_when_private_urls_are_not_allowed(url: str) -> None:
    with pytest.raises(UnsafeURL, match="must use https"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize(("url", "reason"), MALFORMED_URLS)
def test_a_malformed_url_is_refused_whatever_the_policy(
    url: str, reason: str, allow_private: bool
) -> None:
    with pytest.raises(UnsafeURL, match=re.escape(reason)):
        check_url(url, allow_private=allow_private)


def test_a_url_of_the_maximum_length_passes() -> None:
    prefix = "https://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH - len(prefix))
    assert len(url) == MAX_URL_LENGTH
    assert check_url(url, allow_private=False) == url


@pytest.mark.parametrize("allow_private", [False, True])
def test_a_url_over_the_maximum_length_is_refused(allow_private: bool) -> None:
    prefix = "https://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH + 1 - len(prefix))
    with pytest.raises(UnsafeURL, match=f"at most {MAX_URL_LENGTH} characters"):
        check_url(url, allow_private=allow_private)


@pytest.mark.parametrize(
    "url",
    [
        *NON_PUBLIC_URLS,
        "http://127.0.0.1:8080/hook",
        "http://localhost:3000/hook",
        "http://[::1]:8080/hook",
        "http://10.0.0.1/hook",
        "http://0x7f000001/hook",
        "http://receiver.internal/hook",
    ],
)
def test_allowing_private_urls_relaxes_scheme_and_address_checks(url: str) -> None:
    assert check_url(url, allow_private=True) == url


def test_unsafe_url_is_a_value_error() -> None:
    assert issubclass(UnsafeURL, ValueError)


# --- resolve -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", NON_PUBLIC_URLS)
async def test_resolve_refuses_a_non_public_literal_without_asking_dns(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("93.184.216.34", calls=calls))
    with pytest.raises(UnsafeURL, match="non-public address"):
        await resolve(url, allow_private=False)
    assert calls == []


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("https://93.184.216.34/hook", "93.184.216.34"),
        ("https://0x5db8d822/hook", "93.184.216.34"),
        ("https://1572395042/hook", "93.184.216.34"),
        ("https://[2606:4700:4700::1111]:8443/hook", "2606:4700:4700::1111"),
    ],
)
async def test_resolve_dials_a_public_literal_as_its_canonical_address(
    url: str, address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("10.0.0.1", calls=calls))
    target = await resolve(url, allow_private=False)
    assert target.url == url
    assert target.address == address
    assert calls == []


async def test_resolve_refuses_localhost() -> None:
    with pytest.raises(UnsafeURL, match="non-public address"):
        await resolve("https://localhost/hook", allow_private=False)


async def test_resolve_picks_a_checked_public_address_of_a_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("93.184.216.34", "93.184.216.35", calls=calls))
    target = await resolve("https://hooks.example.com/in", allow_private=False)
    assert target == Target("https://hooks.example.com/in", "hooks.example.com", "93.184.216.34")
    assert calls == [("hooks.example.com", 443)]


async def test_resolve_asks_for_the_urls_port(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("2606:4700:4700::1111", calls=calls))
    target = await resolve("https://hooks.example.com:8443/in", allow_private=False)
    assert target.address == "2606:4700:4700::1111"
    assert calls == [("hooks.example.com", 8443)]


@pytest.mark.parametrize(
    "addresses",
    [
        ("127.0.0.1",),
        ("10.1.2.3",),
        ("169.254.169.254",),
        ("100.64.0.1",),
        ("::1",),
        ("::ffff:127.0.0.1",),
        ("fe80::1%eth0",),
        ("93.184.216.34", "192.168.0.1"),
        ("2606:4700:4700::1111", "fd00::1"),
    ],
)
async def test_resolve_refuses_a_host_name_with_any_non_public_address(
    addresses: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_resolver(monkeypatch, fake_resolver(*addresses))
    with pytest.raises(UnsafeURL, match="resolves to a non-public address") as refused:
        await resolve("https://hooks.example.com/in", allow_private=False)
    # The refusal never says which address: that would map the operator's network.
    for address in addresses:
        assert address.split("%")[0] not in str(refused.value)


async def test_resolve_refuses_a_host_name_that_does_not_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def failing(*args: object, **kwargs: object) -> list[AddrInfo]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    use_resolver(monkeypatch, failing)
    with pytest.raises(UnsafeURL, match="does not resolve"):
        await resolve("https://nowhere.example.com/in", allow_private=False)


async def test_resolve_refuses_a_host_name_with_no_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_resolver(monkeypatch, fake_resolver())
    with pytest.raises(UnsafeURL, match="does not resolve"):
        await resolve("https://empty.example.com/in", allow_private=False)


@pytest.mark.parametrize(
    "url", ["http://hooks.example.com/in", "https://user:pw@hooks.example.com/in"]
)
async def test_resolve_checks_the_url_before_resolving(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("93.184.216.34", calls=calls))
    with pytest.raises(UnsafeURL):
        await resolve(url, allow_private=False)
    assert calls == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost:3000/hook",
        "https://0x7f000001/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "http://receiver.internal/hook",
    ],
)
async def test_resolve_with_private_urls_allowed_neither_resolves_nor_pins(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, object]] = []
    use_resolver(monkeypatch, fake_resolver("10.0.0.1", calls=calls))
    target = await resolve(url, allow_private=True)
    assert target.url == url
    assert target.address is None
    assert calls == []


async def test_resolve_with_private_urls_allowed_still_refuses_malformed_urls() -> None:
    with pytest.raises(UnsafeURL, match="credentials"):
        await resolve("http://user:pw@127.0.0.1/hook", allow_private=True)


# --- is_public ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",  # IPv4-mapped public
        "2002:808:808::1",  # 6to4 around a public IPv4
    ],
)
def test_public_addresses_are_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "0.0.0.0",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",  # shared address space (carrier-grade NAT)
        "100.127.255.254",
        "192.0.0.1",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.1",
        "203.0.113.1",
        "224.0.0.1",
        "224.0.1.1",  # multicast, even where the registry calls it global
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
        "ff0e::1",  # global-scope multicast
        "2001:db8::1",
        "100::1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "2002:7f00:1::",  # 6to4 around 127.0.0.1
        "2002:a00:1::1",  # 6to4 around 10.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "2001:0:5ef5:79fb:0:59d:a0e5:ba1",  # Teredo around a public server
    ],
)
def test_non_public_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["::7f00:1", "::a00:1", "::ffff:0:7f00:1"])
def test_reserved_ipv6_spellings_of_ipv4_are_not_public(address: str) -> None:
    assert ipaddress.ip_address(address).is_reserved
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("https://example.com/hook?token=abc", "https://example.com/hook?token=[redacted]"),
        (
            "https://example.com/h?a=1&b=&c",
            "https://example.com/h?a=[redacted]&b=[redacted]&[redacted]",
        ),
        ("https://example.com/hook", "https://example.com/hook"),
        ("https://example.com/hook?", "https://example.com/hook?"),
    ],
)
def test_redact_query_hides_every_query_value(url: str, redacted: str) -> None:
    assert redact_query(url) == redacted
