"""hpccd's struct_ops congestion controls for the runner's kernel TCP
flows: ``tcp-dctcp`` and ``tcp-hpcc`` (docs/tcp-side.md).

:class:`KernelCc` registers both (hpccd.tcp_side.engine.TcpCc: host-wide, one
owner at a time, taken for the experiment and released at its end) the
first time an experiment needs one, and :meth:`KernelCc.session` prepares
the lab for one algorithm's run:

- ``tcp-dctcp``: DCTCP only works between DCTCP endpoints from the SYN on
  ([DCTCP] section 4; the kernel accepts ECN on a SYN only when the
  listening socket's congestion control needs it), so it is made the
  default congestion control of every host namespace for the run (servers
  started by tools such as iperf3 listen with it); restored after.
- ``tcp-hpcc``: the hosts' XDP program (xdp_host: reflects probes on the
  receivers, keeps the responses on the senders) on every host, the tc
  tracker on each sender, and one TcpSide per sender probing its flows once
  per RTT and writing their windows (T as the native flows', above the
  lab's loaded RTT), with the senders' GSO trains capped for the run at an
  eighth of the slowest link's B x T (hpccd.tcp_side.trains.segs_for; not
  the longer trains within one BDP of the base RTT that one host's flows
  fill the link with: from several senders they grew the queue, fairness's
  p99 139 KB against 18, docs/tcp-side.md "Trains within one BDP");
  everything detached and restored after the run.  Native transport
  engines, which attach their own xdp_host, are closed first (they are
  made again when a native algorithm runs next).
"""
from __future__ import annotations

import contextlib
import socket
from typing import Iterator

from .algos import Algo
from .common import Skip
from .native import hook_last_hop, hpcc_params

__all__ = ["KernelCc"]


class KernelCc:
    def __init__(self, lab, n_flows: int | None = None):
        self.lab = lab
        self.n_flows = n_flows          # HPCC's N (native.hpcc_params)
        self.cc = None
        self.trains: dict | None = None         # the last tcp-hpcc run's train cap (note)

    def __enter__(self) -> "KernelCc":
        self.lab.kernel_cc = self
        return self

    def __exit__(self, *exc) -> None:
        if self.cc is not None:
            self.cc.stop()
            self.cc = None
        self.lab.kernel_cc = None

    def _hpcc(self) -> dict:
        """HPCC's parameters: the experiment's engines' (T measured,
        loaded_rtt.py), else native.hpcc_params."""
        eng = getattr(self.lab, "native", None)
        return dict(eng.hpcc) if eng is not None else hpcc_params(self.n_flows)

    def _register(self):
        if self.cc is None:
            from ..tcp_side.engine import TcpCc, TcpSideError
            try:
                self.cc = TcpCc().start(wait_s=5.0)
            except (TcpSideError, OSError) as e:
                raise Skip(f"cannot register hpccd's TCP congestion controls: {e}") from None
        return self.cc

    def _default_cc(self, hosts: list[str], cc: str) -> dict[str, str]:
        old = {}
        for h in hosts:
            r = self.lab.run(h, ["sysctl", "-n", "net.ipv4.tcp_congestion_control"])
            old[h] = r.stdout.strip()
            r = self.lab.run(h, ["sysctl", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
            if r.returncode != 0:
                raise RuntimeError(f"{h}: cannot make {cc} the default: {r.stderr.strip()}")
        return old

    @contextlib.contextmanager
    def session(self, algo: Algo, senders: list[str], receivers: list[str]) -> Iterator[None]:
        """The lab ready for `algo`'s kernel flows from `senders` to `receivers`."""
        if algo.kind != "kernel" or algo.cc not in ("dctcp", "hpcc"):
            yield
            return
        self._register()
        hosts = list(dict.fromkeys(senders + receivers))
        if algo.cc == "dctcp":
            old = self._default_cc(hosts, "dctcp")
            try:
                yield
            finally:
                for h, cc in old.items():
                    self.lab.run(h, ["sysctl", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
            return
        native = getattr(self.lab, "native", None)
        if native is not None:
            native.release()                     # they hold xdp_host on the hosts' eth0
        with self._hpcc_hosts(hosts, senders):
            yield

    def note(self, p: dict) -> None:
        """Into an experiment's params `p` (after its runs): the senders'
        train cap of its tcp-hpcc runs, and a line of the summary saying it
        (nothing when tcp-hpcc did not run)."""
        if self.trains is None:
            return
        t = self.trains
        p["tcp_hpcc_trains"] = dict(t)
        p["hpcc_text"] = p.get("hpcc_text", "") + (
            f"\ntcp-hpcc: the senders' GSO trains at most {t['segs']} segments (an eighth of "
            f"B x T at {t['bottleneck_bps'] / 1e6:.0f} Mbit/s and T = {t['T_us']:.0f} us, at "
            f"least 2; hpccd.tcp_side.trains.segs_for)")

    @contextlib.contextmanager
    def _hpcc_hosts(self, hosts: list[str], senders: list[str]) -> Iterator[None]:
        import secrets

        from ..bpf import loader as bpf
        from ..tcp_side.engine import TcpSide
        from ..tcp_side.trains import segs_for

        key = secrets.token_bytes(16)
        hp = self._hpcc()
        slowest = min(lk.rate_bps for lk in self.lab.topology.links)
        segs = segs_for(slowest, hp["T_ns"])
        self.trains = {"segs": segs, "bottleneck_bps": slowest, "T_us": hp["T_ns"] / 1e3}
        objs, sides, attached = [], [], []
        try:
            xdp = {}
            for h in hosts:
                o = bpf.BpfObject.open(bpf.object_path("xdp_host"))
                objs.append(o)
                o.load()
                o.map("hpccd_tag_key").update(0, key)
                o.map("hpccd_addrs").update(socket.inet_aton(self.lab.address(h)), 1)
                with bpf.in_netns(self.lab.netns(h)):
                    bpf.xdp_attach("eth0", o.program("hpccd_xdp_host"), mode="skb")
                attached.append((h, "xdp"))
                hook_last_hop(self.lab, h)
                xdp[h] = o
            for h in senders:
                t = bpf.BpfObject.open(bpf.object_path("tc_tracker"))
                objs.append(t)
                t.load()
                with bpf.in_netns(self.lab.netns(h)):
                    bpf.tc_attach("eth0", t.program("hpccd_tc_tracker"), "egress")
                attached.append((h, "tc"))
                line = self.lab.topology.links[self.lab.topology.hosts[h].link].rate_bps
                side = TcpSide(t, xdp[h],
                               hpcc_params={**hp, "line_rate_bps": line},
                               netns=self.lab.netns(h), tcp_cc=self.cc,
                               gso_max_segs=segs, gso_dev="eth0")
                side.start()
                sides.append(side)
                side.start_thread()
            yield
        finally:
            for s in sides:
                s.stop()
            sw = getattr(self.lab, "int_switch", None)
            for h, what in attached:
                if what == "xdp" and sw is not None:
                    with contextlib.suppress(OSError):      # the others still go
                        sw.unhook_host(h)
                with bpf.in_netns(self.lab.netns(h)):
                    if what == "xdp":
                        bpf.xdp_detach("eth0")
                    else:
                        bpf.tc_detach("eth0", "egress")
            for o in objs:
                o.close()
