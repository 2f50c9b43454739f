"""Loss on a lab link: the lab's loss program (ebpf/lab_loss.bpf.c) on tc
ingress of both ends of the link between two switches, so that the data
and the feedback crossing it are dropped alike: random loss with
probability p (mode 0) or Gilbert-Elliott bursts (mode 1: entering the bad
state with p_enter, leaving it with p_exit, dropping with p_bad there).
One home for the gbn-vs-sr experiment (hpccd.experiment.recovery) and the
transport's loss tests.

    loss = LinkLoss(lab, 0.01)            # s1 - s2, 1 % each way
    try: ...; loss.counts()["dropped"]
    finally: loss.close()
"""
from __future__ import annotations

import struct
import sys

__all__ = ["LinkLoss", "LOSS_TC", "RANDOM", "GILBERT_ELLIOTT"]

# lab_loss's tc ingress filter (handle, priority): after the lab's own
# departure program there (int_sw_depart, handle 1 priority 1), which lets
# the next filter run
LOSS_TC = (2, 2)
RANDOM, GILBERT_ELLIOTT = 0, 1
# the counter slots of hpccd_loss_cnt
_SLOTS = {"seen": 0, "dropped": 1, "bursts": 3}


def _u32(p: float) -> int:
    """A probability as lab_loss compares it: a share of 2^32."""
    return min(int(p * 2 ** 32), 2 ** 32 - 1)


class LinkLoss:
    """lab_loss on tc ingress of both ends of the link between switches
    `between` (one object per switch: its maps are not per interface);
    removed by close(), also when the set-up fails half-way."""

    def __init__(self, lab, p: float, *, between: tuple[str, str] = ("s1", "s2"),
                 mode: int = RANDOM, p_enter: float = 0.0, p_exit: float = 1.0,
                 p_bad: float = 1.0):
        from ..bpf import loader as bpf

        self.lab = lab
        self.objs: list[tuple[str, str, object, bool]] = []
        a, b = between
        try:
            for sw, peer in ((b, a), (a, b)):          # b receives the data, a the feedback
                port = lab.topology.switches[sw].port_to(peer)
                obj = bpf.BpfObject.open(bpf.object_path("lab_loss"))
                self.objs.append((sw, f"p{port}", obj, False))
                obj.load()
                obj.map("hpccd_loss_cfg").update(0, struct.pack("<II", _u32(p), mode))
                if mode == GILBERT_ELLIOTT:
                    obj.map("hpccd_loss_ext").update(0, struct.pack(
                        "<IIII", _u32(p_enter), _u32(p_exit), _u32(p_bad), 0))
                with bpf.in_netns(lab.netns(sw)):
                    bpf.tc_attach(f"p{port}", obj.program("hpccd_lab_loss"), "ingress",
                                  *LOSS_TC)
                self.objs[-1] = (sw, f"p{port}", obj, True)
        except BaseException:
            self.close()
            raise

    def counts(self) -> dict[str, int]:
        """Packets seen, dropped and bursts begun at both ends so far."""
        return {k: sum(sum(int.from_bytes(v[:8], sys.byteorder)
                           for v in obj.map("hpccd_loss_cnt").lookup(slot))
                       for _, _, obj, _ in self.objs)
                for k, slot in _SLOTS.items()}

    def dropped(self) -> int:
        return self.counts()["dropped"]

    def close(self) -> None:
        from ..bpf import loader as bpf

        objs, self.objs = self.objs, []
        for sw, port, obj, attached in objs:
            try:
                if attached:
                    with bpf.in_netns(self.lab.netns(sw)):
                        bpf.tc_detach(port, "ingress", *LOSS_TC)
            finally:
                obj.close()
