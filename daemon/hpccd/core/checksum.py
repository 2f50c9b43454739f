"""The Internet checksum (RFC 1071) in Python: the one copy the package uses.

The 16-bit ones' complement of the ones' complement sum of the data taken as
big-endian 16-bit words, an odd last byte padded with a zero byte.  It is
the checksum of the IPv4 header, ICMP, UDP and TCP (for UDP and TCP the
caller puts the pseudo-header in front of the segment).  C has one of its
own, include/hpccd/csum.h (userspace; the BPF programs sum with the kernel's
bpf_csum_diff(), include/hpccd/build.h "Checksums").

Users: the lab's ICMP echo (hpccd.lab.reach), the TCP-side probe
(hpccd.tcp_side.engine) and the tests that check or craft checksums.  A
buffer that carries its correct checksum sums to 0; the complement of the
result is the folded sum itself (what a CHECKSUM_PARTIAL field holds).
"""
from __future__ import annotations

import struct

__all__ = ["internet_checksum"]


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 checksum of `data`, as the integer to write big-endian into
    the header's checksum field (whose bytes count as zero while summing)."""
    data = bytes(data)
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF
