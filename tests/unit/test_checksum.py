"""hpccd.core.checksum: the package's one Internet checksum (RFC 1071), against
known vectors and against scapy's independent implementation."""
from __future__ import annotations

import random
import struct

import pytest
from scapy.utils import checksum as scapy_checksum

from hpccd.core.checksum import internet_checksum

VECTORS = [
    # RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to 2ddf0, folded
    # ddf2, whose complement is 220d.
    ("RFC 1071 numerical example", bytes.fromhex("0001f203f4f5f6f7"), 0x220D),
    # An IPv4 header (20 bytes, UDP, 192.168.0.1 -> 192.168.0.199) with its
    # checksum field zeroed; the header as sent carries b861.
    ("IPv4 header", bytes.fromhex("450000730000400040110000c0a80001c0a800c7"), 0xB861),
    ("empty", b"", 0xFFFF),
    ("odd length: the last byte is the high byte of a zero-padded word",
     b"\x01", 0xFEFF),
    ("a sum of 0xffff complements to 0", b"\xff\xff\xff\xff", 0x0000),
    ("carries wrap around more than once", b"\xff\xff" * 70000 + b"\x00\x02", 0xFFFD),
]


@pytest.mark.parametrize("what,data,want", VECTORS, ids=[v[0] for v in VECTORS])
def test_known_vectors(what, data, want):
    assert internet_checksum(data) == want


def test_a_buffer_with_its_checksum_sums_to_zero():
    hdr = bytearray.fromhex("450000730000400040110000c0a80001c0a800c7")
    struct.pack_into("!H", hdr, 10, internet_checksum(hdr))
    assert hdr[10:12] == b"\xb8\x61"
    assert internet_checksum(hdr) == 0


def test_agrees_with_scapy_on_random_buffers():
    rng = random.Random(1071)
    for n in list(range(0, 70)) + [1499, 1500, 9000]:
        data = rng.randbytes(n)
        assert internet_checksum(data) == scapy_checksum(data), n


def test_accepts_bytearray_and_memoryview():
    data = bytes.fromhex("0001f203f4f5f6f7")
    assert internet_checksum(bytearray(data)) == internet_checksum(memoryview(data)) == 0x220D
