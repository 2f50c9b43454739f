"""hpccd.lab.int_switch.port_config: what each switch port's struct
hpccd_sw_port says for a topology (docs/lab.md "The INT switch").

The struct, flag bits and counter slots come from include/hpccd/kern_user.h
through the loader's cffi module; these tests pin the mapping from the
topology's keys to them, including the fast-start classes."""
from __future__ import annotations

import pytest

from hpccd.lab import int_switch
from hpccd._bpf import ffi, lib
from hpccd.experiment.common import line
from hpccd.lab.topology import Ecn, Topology


def _cfg(ecn_toml: str = "", port: int = 2, **kw):
    # h1 - s1 - h2: h1's link 2 Gbit/s with 200 KB, s1 -> h2 (port 2) 100 Mbit/s with 50 KB
    topo = Topology.loads(line("t", "10.50.0.0/24", 0x123, 2000, 200_000, 100, 50_000,
                               ecn=ecn_toml))
    sw = topo.switches["s1"]
    return int_switch.port_config(sw, sw.port(port), **kw), sw.port(port)


def test_struct_layout_is_the_headers():
    assert ffi.sizeof("struct hpccd_sw_port") == 40
    assert ffi.sizeof("struct hpccd_sw_sample") == 48
    assert int_switch.N_SLOTS == lib.HPCCD_SW_COUNTERS
    assert int_switch.COUNTER_NAMES[lib.HPCCD_SW_ECN_MARKED] == "ecn_marked"
    assert int_switch.COUNTER_NAMES[0] == "forwarded"


def test_plain_port_stamps_and_samples_only():
    c, port = _cfg(port=2)
    assert c.flags == lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_DEPART | lib.HPCCD_SW_F_SAMPLE
    assert (c.switch_id, c.port, c.buffer_bytes) == (0x123, 2, 50000)
    assert c.speed_code == port.speed_code != 0
    assert (c.kmin_bytes, c.kmax_bytes, c.pmax_u32, c.fast_start_k_bytes) == (0, 0, 0, 0)
    c1, p1 = _cfg(port=1)
    assert (c1.port, c1.buffer_bytes) == (1, 200000) and c1.speed_code != c.speed_code


def test_ecn_thresholds_and_pmax_as_a_fraction_of_2_32():
    c, _ = _cfg("ecn = { kmin_bytes = 1000, kmax_bytes = 9000, pmax = 0.25 }")
    assert c.flags == lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_DEPART | lib.HPCCD_SW_F_SAMPLE | lib.HPCCD_SW_F_ECN
    assert (c.kmin_bytes, c.kmax_bytes, c.pmax_u32) == (1000, 9000, 1 << 30)
    c, _ = _cfg("ecn = { kmin_bytes = 9000, kmax_bytes = 9000, pmax = 1.0 }")
    assert c.pmax_u32 == 0xFFFFFFFF


@pytest.mark.parametrize("cls, flag, dscp", [
    (None, "FS_HPCCD", 0), ('"hpccd"', "FS_HPCCD", 0), ('"all"', "FS_ALL", 0),
    ("46", "FS_DSCP", 46)])
def test_fast_start_class(cls, flag, dscp):
    extra = f", fast_start_class = {cls}" if cls else ""
    c, _ = _cfg("ecn = { kmin_bytes = 3000, kmax_bytes = 3000, pmax = 1.0, "
                f"fast_start_k_bytes = 4000{extra} }}")
    assert c.flags & lib.HPCCD_SW_F_FS_MASK == getattr(lib, f"HPCCD_SW_F_{flag}")
    assert (c.fast_start_k_bytes, c.fs_dscp) == (4000, dscp)


def test_explicit_ecn_overrides_and_none_turns_marking_off():
    c, _ = _cfg("ecn = { kmin_bytes = 1000, kmax_bytes = 9000, pmax = 0.25 }", ecn=None)
    assert c.flags == lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_DEPART | lib.HPCCD_SW_F_SAMPLE
    c, _ = _cfg(ecn=Ecn(500, 500, 1.0, 700, "all"), sample=False)
    assert c.flags == lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_DEPART | lib.HPCCD_SW_F_ECN | lib.HPCCD_SW_F_FS_ALL
    assert (c.kmin_bytes, c.kmax_bytes, c.fast_start_k_bytes) == (500, 500, 700)
    c, _ = _cfg(depart=False)
    assert c.flags == lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_SAMPLE          # record at enqueue
    c, _ = _cfg(stamp=False)
    assert c.flags == lib.HPCCD_SW_F_SAMPLE                               # no INT: no departure
