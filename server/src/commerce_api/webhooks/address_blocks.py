"""The address blocks a webhook receiver may not be in: one table, from IANA's registries.

Drawn from the IANA IPv4 and IPv6 Special-Purpose Address Registries (every block whose
"Globally Reachable" is not True), the multicast registries, and the IPv6 address space
registry (only ``2000::/3`` is allocated as global unicast; the rest is reserved, local or
deprecated, as ``fec0::/10``). Python's ``is_global`` is not used: it lags the registries
(``192.0.0.8`` passed it). Two blocks are refused whole although a few addresses inside them
are globally reachable anycast services (``192.0.0.9``, ``192.0.0.10``; ``2001:1::1``,
``2001:3::/32``, ``2001:4:112::/48``, ``2001:20::/28``): a protocol service, never a receiver.

Addresses that embed an IPv4 address (``::ffff:0:0/96`` IPv4-mapped, ``64:ff9b::/96`` NAT64,
``2002::/16`` 6to4) are judged by the address they embed, before this table
(``url_policy.is_public``).
"""

from __future__ import annotations

import ipaddress
from typing import Final

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# (block, what it is): a receiver's address in any of these is refused.
REFUSED_BLOCKS: Final[tuple[tuple[str, str], ...]] = (
    # IPv4 Special-Purpose Address Registry
    ("0.0.0.0/8", "this network (RFC 791)"),
    ("10.0.0.0/8", "private use (RFC 1918)"),
    ("100.64.0.0/10", "shared address space (RFC 6598)"),
    ("127.0.0.0/8", "loopback (RFC 1122)"),
    ("169.254.0.0/16", "link local (RFC 3927)"),
    ("172.16.0.0/12", "private use (RFC 1918)"),
    ("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
    ("192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)"),
    ("192.168.0.0/16", "private use (RFC 1918)"),
    ("198.18.0.0/15", "benchmarking (RFC 2544)"),
    ("198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)"),
    ("203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)"),
    ("224.0.0.0/4", "multicast (RFC 5771)"),
    ("240.0.0.0/4", "reserved (RFC 1112), with the limited broadcast address"),
    # IPv6 Special-Purpose Address Registry
    ("::1/128", "loopback (RFC 4291)"),
    ("::/128", "unspecified (RFC 4291)"),
    ("::/96", "deprecated IPv4-compatible (RFC 4291)"),
    ("::ffff:0:0:0/96", "IPv4-translated (RFC 2765)"),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"),
    ("100::/64", "discard-only (RFC 6666)"),
    ("100:0:0:1::/64", "dummy IPv6 prefix (RFC 9780)"),
    ("2001::/23", "IETF protocol assignments, Teredo among them (RFC 2928)"),
    ("2001:db8::/32", "documentation (RFC 3849)"),
    ("3fff::/20", "documentation (RFC 9637)"),
    ("5f00::/16", "segment routing SIDs (RFC 9602)"),
    ("fc00::/7", "unique local (RFC 4193)"),
    ("fe80::/10", "link-local unicast (RFC 4291)"),
    ("fec0::/10", "deprecated site-local (RFC 3879)"),
    ("ff00::/8", "multicast (RFC 4291)"),
    # IPv6 Address Space registry: outside 2000::/3 nothing is global unicast
    ("::/3", "not global unicast: reserved by the IETF (RFC 4291)"),
    ("4000::/2", "not global unicast: reserved by the IETF (RFC 4291)"),
    ("8000::/1", "not global unicast: reserved, local or multicast (RFC 4291)"),
)

_NETWORKS: Final[tuple[tuple[IPNetwork, str], ...]] = tuple(
    (ipaddress.ip_network(block), name) for block, name in REFUSED_BLOCKS
)


def refused_block(address: IPAddress) -> str | None:
    """What the first refused block that holds ``address`` is (None: none holds it)."""
    for network, name in _NETWORKS:
        if network.version == address.version and address in network:
            return name
    return None
