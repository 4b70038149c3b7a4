"""Link layer: find where the IP header starts in a frame of a given LINKTYPE."""

import struct

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_ALT = 12  # DLT_RAW's value on most BSDs, found in some files for raw IP
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
# 802.1Q, 802.1ad, and the pre-standard QinQ tags still seen in the wild.
VLAN_TAGS = frozenset((0x8100, 0x88A8, 0x9100, 0x9200))

# Address family values for IPv6 differ between BSDs (NetBSD/OpenBSD 24, FreeBSD 28, macOS 30).
AF_INET = 2
AF_INET6 = frozenset((24, 28, 30))

# Network-layer protocol a frame carries: 4, 6, or 0 when it is neither IPv4 nor IPv6.
IPV4, IPV6, OTHER = 4, 6, 0

_U16 = struct.Struct("!H").unpack_from
_U32_BE = struct.Struct(">I").unpack_from
_U32_LE = struct.Struct("<I").unpack_from


def _from_ethertype(ethertype: int, off: int) -> tuple[int, int]:
    if ethertype == ETH_IPV4:
        return IPV4, off
    if ethertype == ETH_IPV6:
        return IPV6, off
    return OTHER, off


def _from_af(af: int, off: int) -> tuple[int, int]:
    if af == AF_INET:
        return IPV4, off
    if af in AF_INET6:
        return IPV6, off
    return OTHER, off


def ethernet(data: bytes) -> tuple[int, int]:
    """Skip the MAC header and any number of stacked VLAN tags."""
    if len(data) < 14:
        return OTHER, 0
    ethertype = _U16(data, 12)[0]
    off = 14
    while ethertype in VLAN_TAGS:
        if len(data) < off + 4:
            return OTHER, 0
        ethertype = _U16(data, off + 2)[0]
        off += 4
    # Values below 0x600 are 802.3 lengths (LLC frames), which do not carry IP here.
    return _from_ethertype(ethertype, off)


def linux_sll(data: bytes) -> tuple[int, int]:
    """Linux cooked capture v1: 16-byte header, protocol (an ethertype) in the last two bytes."""
    if len(data) < 16:
        return OTHER, 0
    return _from_ethertype(_U16(data, 14)[0], 16)


def linux_sll2(data: bytes) -> tuple[int, int]:
    """Linux cooked capture v2: 20-byte header, protocol in the first two bytes."""
    if len(data) < 20:
        return OTHER, 0
    return _from_ethertype(_U16(data, 0)[0], 20)


def bsd_null(data: bytes) -> tuple[int, int]:
    """BSD loopback: a 4-byte AF value in the capturing host's byte order."""
    if len(data) < 4:
        return OTHER, 0
    af = _U32_LE(data, 0)[0]
    if af > 0xFFFF:  # written big-endian: the value sits in the high bytes read this way
        af = _U32_BE(data, 0)[0]
    return _from_af(af, 4)


def openbsd_loop(data: bytes) -> tuple[int, int]:
    """OpenBSD loopback: like NULL but the AF value is always big-endian."""
    if len(data) < 4:
        return OTHER, 0
    return _from_af(_U32_BE(data, 0)[0], 4)


def raw_ip(data: bytes) -> tuple[int, int]:
    """No link header: the IP version nibble tells which protocol follows."""
    if not data:
        return OTHER, 0
    version = data[0] >> 4
    if version == 4:
        return IPV4, 0
    if version == 6:
        return IPV6, 0
    return OTHER, 0


def raw_ipv4(data: bytes) -> tuple[int, int]:
    return IPV4, 0


def raw_ipv6(data: bytes) -> tuple[int, int]:
    return IPV6, 0


# LINKTYPE -> function returning (network protocol, offset of its header).
HANDLERS = {
    LINKTYPE_NULL: bsd_null,
    LINKTYPE_ETHERNET: ethernet,
    LINKTYPE_RAW_ALT: raw_ip,
    LINKTYPE_RAW: raw_ip,
    LINKTYPE_LOOP: openbsd_loop,
    LINKTYPE_LINUX_SLL: linux_sll,
    LINKTYPE_IPV4: raw_ipv4,
    LINKTYPE_IPV6: raw_ipv6,
    LINKTYPE_LINUX_SLL2: linux_sll2,
}
