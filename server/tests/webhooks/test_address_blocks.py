"""The table of refused receiver address blocks (``webhooks/address_blocks.py``), block by
block: the first, a middle and the last address of each are refused as a receiver URL's host,
and the public addresses beside them pass."""

from __future__ import annotations

import ipaddress

import pytest

from commerce_api.webhooks.address_blocks import REFUSED_BLOCKS, refused_block
from commerce_api.webhooks.url_policy import UnsafeURL, check_url, is_public


def _url(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"https://{host}/hook"


@pytest.mark.parametrize(("block", "name"), REFUSED_BLOCKS, ids=[b for b, _ in REFUSED_BLOCKS])
def test_every_address_of_a_refused_block_is_refused(block: str, name: str) -> None:
    network = ipaddress.ip_network(block)
    middle = network.network_address + network.num_addresses // 2
    for address in (network.network_address, middle, network.broadcast_address):
        assert refused_block(address) is not None, address
        assert not is_public(address), address
        with pytest.raises(UnsafeURL, match="non-public address"):
            check_url(_url(address), allow_private=False)


@pytest.mark.parametrize(
    "host",
    [
        "[fec0::1]",  # site-local: Python's is_global let it through
        "192.0.0.8",  # IPv4 dummy address: the same
        "192.0.0.9",  # anycast inside 192.0.0.0/24: refused with its block
        "[64:ff9b:1::a00:1]",
        "[64:ff9b::7f00:1]",  # NAT64 to 127.0.0.1
        "[64:ff9b::a9fe:a9fe]",  # NAT64 to 169.254.169.254
        "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",  # Teredo
        "[3fff::1]",
        "[5f00::1]",
        "[100:0:0:1::1]",
    ],
)
def test_the_review_s_reserved_addresses_are_refused(host: str) -> None:
    with pytest.raises(UnsafeURL, match="non-public address"):
        check_url(f"https://{host}/hook", allow_private=False)


@pytest.mark.parametrize(
    "host",
    [
        "93.184.216.34",
        "8.8.8.8",
        "100.128.0.1",  # just past 100.64.0.0/10
        "198.20.0.1",  # just past 198.18.0.0/15
        "192.0.1.1",  # just past 192.0.0.0/24
        "223.255.255.254",  # just below multicast
        "[2606:4700:4700::1111]",
        "[2a00:1450:4001:80b::200e]",
        "[2001:200::1]",  # just past 2001::/23
        "[64:ff9b::808:808]",  # NAT64 to 8.8.8.8
        "[::ffff:8.8.8.8]",
        "[2002:808:808::1]",  # 6to4 of 8.8.8.8
    ],
)
def test_public_addresses_beside_the_blocks_pass(host: str) -> None:
    url = f"https://{host}/hook"
    assert check_url(url, allow_private=False) == url
