"""Which receiver URLs the service may call.

Unless the operator opts in (``COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS=true``, which ``serve --demo``
sets), in every environment, a receiver must be ``https`` and every address its host stands for
must be public: in none of the blocks of ``address_blocks.REFUSED_BLOCKS`` (IANA's
special-purpose registries), in any spelling (``0x7f000001``, ``2130706433``, ``127.1``,
``[::ffff:127.0.0.1]``, ``[64:ff9b::7f00:1]``). IP literals are judged at registration; host
names are resolved at registration and again at every delivery, and the delivery connects to
the very address that was checked (so a DNS answer that changes in between cannot redirect it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from commerce_api.webhooks.address_blocks import refused_block

MAX_URL_LENGTH = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeURL(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect: ``address`` is the checked IP to dial (None: resolve as usual)."""

    url: str
    host: str
    address: str | None


def _literal_address(host: str) -> IPAddress | None:
    """The IP a host name spells, also in the legacy forms inet_aton accepts (hex, decimal,
    short dotted), which resolvers honour too."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


# The IPv6 spellings of an IPv4 address, judged by the address they embed.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, 6to4 or NAT64 (well-known prefix) address reaches."""
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.ipv4_mapped or address.sixtofour


def is_public(address: IPAddress) -> bool:
    """Whether a receiver may be at ``address``: in no block of ``address_blocks``."""
    if isinstance(address, ipaddress.IPv6Address) and (v4 := embedded_ipv4(address)) is not None:
        return is_public(v4)
    return refused_block(address) is None


def check_url(url: str, *, allow_private: bool) -> str:
    """Refuse a receiver URL that cannot be registered; returns it unchanged otherwise.

    Host names are not resolved here (see :func:`resolve`); callers that register an endpoint
    in production call both.
    """
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeURL(f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"is not a valid URL ({exc})") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UnsafeURL("must be an absolute http(s) URL, such as https://example.com/webhooks")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL("must not contain credentials; put them in the path or query instead")
    if parts.fragment:
        raise UnsafeURL("must not contain a fragment (#…)")
    if port == 0:
        raise UnsafeURL("must not use port 0")
    if allow_private:
        return url
    if parts.scheme != "https":
        raise UnsafeURL("must use https")
    literal = _literal_address(parts.hostname)
    if literal is not None and not is_public(literal):
        # The address the caller's own spelling stands for (not a DNS answer): safe to name.
        raise UnsafeURL(f"must not point to a non-public address ({literal})")
    return url


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check ``url`` and, unless private addresses are allowed, pick a checked public address
    of its host to connect to."""
    check_url(url, allow_private=allow_private)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if allow_private:
        return Target(url, host, None)
    literal = _literal_address(host)
    if literal is not None:
        return Target(url, host, str(literal))
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, parts.port or 443, type=socket.SOCK_STREAM
        )
    except OSError as exc:
        raise UnsafeURL(f"host {host!r} does not resolve ({exc})") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not addresses:
        raise UnsafeURL(f"host {host!r} does not resolve")
    if not all(is_public(address) for address in addresses):
        # Which address is not said: the answer would map the operator's network for a caller.
        raise UnsafeURL(f"host {host!r} resolves to a non-public address")
    return Target(url, host, str(addresses[0]))


REDACTED = "[redacted]"


def redact_query(url: str) -> str:
    """``url`` with each query parameter's value replaced by ``[redacted]`` (its name kept; a
    parameter without ``=`` is redacted whole): ``?token=abc`` → ``?token=[redacted]``."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    params = [
        f"{name}={REDACTED}" if sep else (REDACTED if name else "")
        for name, sep, _ in (param.partition("=") for param in parts.query.split("&"))
    ]
    return urlunsplit(parts._replace(query="&".join(params)))
