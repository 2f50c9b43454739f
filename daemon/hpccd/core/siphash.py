"""SipHash-2-4 with a 64-bit output, in pure Python.

The integrity tag of NOTIFY and PROBE_RESP (docs/wire-format.md, "Integrity
tag") is SipHash-2-4 under a 128-bit key.  The BPF programs and the C fast
path compute it in C; this twin serves the scapy layers, the test vectors
and ``hpccctl decode``.  It follows the algorithm as published (Aumasson and
Bernstein, "SipHash: a fast short-input PRF", 2012): the key and the message
words are read little-endian, 2 compression rounds per 8-byte block, 4
finalisation rounds.  The result is returned as an integer; the wire carries
it big-endian (``siphash24(...).to_bytes(8, "big")``).

Not constant-time and not fast: for tests and tools, never for the data path.
"""
from __future__ import annotations

__all__ = ["siphash24"]

_MASK = 0xFFFFFFFFFFFFFFFF


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _MASK
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _MASK
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _MASK
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _MASK
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(key16: bytes, msg: bytes) -> int:
    """SipHash-2-4 of ``msg`` under the 16-byte ``key16``, as a 64-bit integer."""
    key16 = bytes(key16)
    if len(key16) != 16:
        raise ValueError(f"SipHash key must be 16 bytes, got {len(key16)}")
    msg = bytes(msg)
    k0 = int.from_bytes(key16[:8], "little")
    k1 = int.from_bytes(key16[8:], "little")
    # "somepseudorandomlygeneratedbytes", the paper's initialisation constants.
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    n = len(msg)
    end = n - n % 8
    for i in range(0, end, 8):
        m = int.from_bytes(msg[i:i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m

    # Last block: the remaining 0..7 bytes, zero-filled, length mod 256 in
    # the top byte.
    b = ((n & 0xFF) << 56) | int.from_bytes(msg[end:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= b

    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3
