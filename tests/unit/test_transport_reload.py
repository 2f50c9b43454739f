"""A reload of [hpcc] reaches the transport component's receivers
(Rx-HPCC): docs/configuration.md says every [hpcc] key is reloadable for
the flows that start afterwards, and `rx-hpcc` reads [hpcc] at the
receiver.  What set_rx_hpcc does in the engine is tested on real engines
(tests/integration/test_transport.py -k rx_hpcc_set_later); here, that a
reload calls it on every engine, with the new table, only when it changed."""
from __future__ import annotations

import logging
import types

from hpccd.transport import component


class _Tp:
    """What the component calls of an engine on a reload, recorded."""

    def __init__(self):
        self.rx: list[dict] = []
        self.keys: list[bytes] = []

    def set_rx_hpcc(self, params) -> None:
        self.rx.append(dict(params))

    def set_tag_key(self, key: bytes) -> None:
        self.keys.append(key)


def _component(hpcc: dict):
    ctx = types.SimpleNamespace(tag_key=None, log=logging.getLogger("test"))
    comp = component.TransportComponent(ctx)
    comp._rx_hpcc = dict(hpcc)                 # as start() took it from the file
    tps = [_Tp(), _Tp()]
    comp.engines = [component._Engine("eth0", 1, q, tp) for q, tp in enumerate(tps)]
    return comp, tps


def _config(hpcc: dict):
    return types.SimpleNamespace(read_key=lambda: None, params={"hpcc": hpcc})


def test_a_reload_of_hpcc_sets_every_engines_receivers():
    comp, tps = _component({"T_ns": 13_000})
    comp.apply_config(_config({"T_ns": 40_000, "eta": 0.9}))
    assert [tp.rx for tp in tps] == [[{"T_ns": 40_000, "eta": 0.9}]] * 2
    comp.apply_config(_config({"T_ns": 40_000, "eta": 0.9}))     # unchanged: not again
    assert [len(tp.rx) for tp in tps] == [1, 1]
    comp.apply_config(_config({}))                               # back to the defaults
    assert [tp.rx[-1] for tp in tps] == [{}, {}]
    assert [tp.keys for tp in tps] == [[], []]                   # the key did not change
