"""The algorithm registry (hpccd.core.algorithms) against what it stands for.

Invariants protected:
- its rows are exactly the C enum hpccd_algo of include/hpccd/cc.h, value for value, as
  both the core's and the transport engine's cffi modules see it;
- each row's class is the core's class of that algorithm, and the parameter table it names
  takes that class's keys;
- everything that lists algorithms reads the registry: the configuration, replay's event
  formats, hpccctl send's choices, the transport, the experiments' rows;
- DCTCP's g becomes the core's g_shift in one place, and bad values are refused there.
"""
from __future__ import annotations

import pytest

from hpccd._cc import ffi as cc_ffi
from hpccd.agent import config
from hpccd.core import algorithms, cc, replay
from hpccd.core.algorithms import ALGORITHMS, NAMES
from hpccd.experiment.algos import ALGOS as EXPERIMENT_ALGOS


def _enum(ffi) -> dict[str, int]:
    return dict(ffi.typeof("enum hpccd_algo").relements)


def test_rows_are_the_c_enum():
    enum = _enum(cc_ffi)
    assert sorted(a.enum for a in ALGORITHMS.values()) == sorted(enum.values())
    assert len({a.enum for a in ALGORITHMS.values()}) == len(ALGORITHMS)
    # The C name of each value spells the row's name without its hyphen.
    by_value = {v: k for k, v in enum.items()}
    for a in ALGORITHMS.values():
        assert by_value[a.enum] == "HPCCD_ALGO_" + a.name.replace("-", "").upper()


def test_transport_module_sees_the_same_enum():
    transport = pytest.importorskip("hpccd._transport", reason="libxdp/libbpf module")
    assert _enum(transport.ffi) == _enum(cc_ffi)
    from hpccd.transport import engine
    assert engine.ALGOS == {a.name: a.enum for a in ALGORITHMS.values()}
    assert engine.ALGO_NAMES == {a.enum: a.name for a in ALGORITHMS.values()}


def test_rows_name_the_core_class_and_its_table():
    for a in ALGORITHMS.values():
        assert a.flow_class.algo == a.name
        assert issubclass(a.flow_class, cc._Flow)
        assert config.PARAM_TABLE[a.name] == a.table
        # every algorithm reading a table takes that table's keys
        assert a.flow_class.PARAMS == config.PARAM_KEYS[a.table]
        assert type(algorithms.make_flow(a.name)) is a.flow_class
    assert config.ALGORITHMS == NAMES
    assert ALGORITHMS["rx-hpcc"].table == "hpcc"


def test_make_flow_refuses_an_unknown_name():
    with pytest.raises(cc.ParamError, match=r"unknown algorithm 'cubic' \(known: hpcc, rx-hpcc"):
        algorithms.make_flow("cubic")


def test_replay_has_an_event_format_per_row():
    assert set(replay.EVENT_PARSERS) == set(NAMES)


def test_send_offers_every_row():
    import argparse

    from hpccd.transport import cli as transfer_cli
    p = argparse.ArgumentParser()
    transfer_cli.add_parsers(p.add_subparsers(dest="cmd"))
    send = p._subparsers._group_actions[0].choices["send"]
    algo = next(a for a in send._actions if a.dest == "algo")
    assert tuple(algo.choices) == NAMES


def test_experiment_rows_run_registry_algorithms():
    native = [a for a in EXPERIMENT_ALGOS.values() if a.kind == "native"]
    for name in NAMES:                      # every algorithm under its own name
        assert EXPERIMENT_ALGOS[name].engine == name
    for a in native:
        row = ALGORITHMS[a.engine]
        assert a.needs_ecn == row.needs_ecn
        assert a.int_mode in ("every", "none", "probe")
        assert not a.rate_win or row.rate_based       # "+win" only on a rate-based one
    for a in EXPERIMENT_ALGOS.values():
        assert (a.kind == "kernel") == (a.engine is None)


def test_dctcp_g_is_converted_once():
    assert cc.dctcp_g_shift(1 / 16) == 4
    assert cc.dctcp_g_shift(0.5) == 1
    for bad in (0.1, 0, 1.0, 2 ** -16, "x"):
        with pytest.raises(cc.ParamError, match="'g'"):
            cc.dctcp_g_shift(bad)
    # the core's Python face converts through it: the C state's shift is k
    assert cc.Dctcp(g=1 / 16)._s.shf == 4
    assert cc.Dctcp(g=1 / 256)._s.shf == 8
    with pytest.raises(cc.ParamError, match="'g'"):
        cc.Dctcp(g=0.1)
