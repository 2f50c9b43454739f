"""The native transport in the daemon: ``components = ["transport"]``
(hpccd.agent.component; docs/configuration.md "Components", docs/transport.md).

One engine (hpccd.transport.engine.Transport: UMEM, AF_XDP socket, native thread)
per configured interface queue.  The daemon core attached xdp_host already
(with the configuration's port, DSCP, flags and integrity key); the
component binds each engine's socket into that program's ``hpccd_xsks`` at
its queue, and removes it again on stop, so that the programs the core
detaches are the only thing left to undo.

Flows.  Sender flows are opened through the control socket (``send``:
``hpccctl send PEER --bytes N --daemon``) with the policy of the peer's
address (algorithm, parameters, ``peer`` label; DCTCP only toward declared
DCTCP endpoints, [DCTCP] section 4) and the configuration's INT mode:

- ``hpcc``: ``probes.mode = "probe"``: no INT in data packets, one probe
  per RTT while data is in flight, reflected by the receiver's xdp_host
  ([HPCC++2022] section 6.2.1), ``probes.timeout_us`` before a probe is lost;
  ``"inband"``: INT in every ``probes.inband_every``-th data packet, echoed
  in ACKs ([HPCC++2022] section 6.3.1);
- ``rx-hpcc``: INT in data packets (every ``inband_every``-th), the
  receiver computes W with NewINT once per T and sends a tagged NOTIFY
  ([HPCC++2022] section 6.3.2, [HPCC++2020] section 6.2, NewINT lines 28-34);
- ``dctcp``, ``ldcp``: no INT.

The NIC rate of a flow (pacing ceiling, B_NIC) is the peer's
``hpcc.line_rate_bps``.  Receiver flows appear by themselves (DATA of any
sender); they are published with the ``peer`` label of the sender's address
and ``algorithm="unknown"`` (:data:`RECEIVER_ALGORITHM`): the wire does not
carry the sender's algorithm, and this host's policy for that address is
not it (the sender's own policy chose it; HPCC and Rx-HPCC data even look
the same to a receiver).

poll() publishes every flow's state to the daemon's flow table (windows,
rates, U / alpha / cw, smoothed RTT and probe RTT, bytes, retransmissions,
probe and NOTIFY counts; a finished flow's engine-measured FCT into the FCT
histogram) and the engines' drops by cause to ``hpccd_drops_total{layer=
"transport"}`` (:data:`DROP_CAUSES`), then frees the engine slots of
finished flows; their results stay available to ``transfer`` for
:data:`RESULTS_KEPT` flows.

A reload may change the integrity key (the engines take the new one, as
xdp_host does); the engines' own settings (port, frames, ACK factor,
NOTIFY) need a restart (config.RESTART_ONLY).
"""
from __future__ import annotations

import collections
import ipaddress
from typing import Any

from . import engine as tp_mod
from ..core import algorithms, cc
from ..agent.component import Component, ComponentError, idle_backoff
from ..agent.control import ControlError
from ..agent.flows import FlowLimitError

__all__ = ["TransportComponent", "COMPONENT", "DROP_CAUSES", "RESULTS_KEPT"]

RESULTS_KEPT = 256
# hpccd_drops_total{layer="transport", cause=...}: engine counter -> cause.
ENGINE_DROPS = {
    "bad_csum": "data_checksum",          # DATA with a wrong UDP checksum
    "bad_body": "bad_body",               # wrong direction, a NOTIFY, a PROBE of a wrong length ...
    "unknown_flow": "unknown_flow",       # feedback for no open flow
    "rx_table_full": "rx_table_full",     # DATA of a new flow with no receiver slot
    "rx_peer_full": "rx_peer_full",       # DATA of a new flow of a peer at rx_peer_max
    "rx_probe_full": "rx_probe_full",     # DATA of a new flow past the table's probe bound
    "rx_peer_table_full": "rx_peer_table_full",  # DATA of a new flow whose source has no entry
    "ack_dropped": "feedback_no_frame",   # feedback not sent for want of a TX frame
    "probes_no_key": "probe_no_key",      # a PROBE not answered: no key
    "k_rx_dropped": "xsk_rx_dropped",     # the kernel's AF_XDP RX drops
}
# Per sender flow counter -> cause.
FLOW_DROPS = {
    "bad_tags": "feedback_tag",           # ACK/NACK untagged or tag not verified ([HPCC++2022] 9.1)
    "fb_replayed": "feedback_replayed",   # ACK/NACK with an old fb_seq (replay)
    "probe_bad_tags": "probe_resp_tag",   # PROBE_RESP whose tag did not verify
    "probes_late": "probe_resp_late",     # response to a probe already counted lost
}
DROP_CAUSES = tuple(ENGINE_DROPS.values()) + tuple(FLOW_DROPS.values()) + ("malformed",)
ENGINE_MODE = "copy"                      # zero-copy needs a driver with it (not veth)


# The algorithm label of receiver flows: the receiver cannot know the sender's.
RECEIVER_ALGORITHM = "unknown"

class _Sender:
    def __init__(self, fid: int, engine: "_Engine", flow: tp_mod.Flow, info: dict[str, Any]):
        self.fid, self.engine, self.flow, self.info = fid, engine, flow, info
        self.drops = dict.fromkeys(FLOW_DROPS, 0)


class _Engine:
    def __init__(self, iface: str, ifindex: int, queue: int, tp: tp_mod.Transport):
        self.iface, self.ifindex, self.queue, self.tp = iface, ifindex, queue, tp
        self.drops: dict[str, int] = dict.fromkeys([*ENGINE_DROPS, "malformed"], 0)
        self.receivers: dict[tuple[str, int], int] = {}     # (saddr, flow_id) -> table id
        self.frames = (-1, -1)           # rx_frames, tx_frames at the last poll

    @property
    def name(self) -> str:
        return f"{self.iface}/{self.queue}"


class TransportComponent(Component):
    name = "transport"
    poll_interval = 0.05
    control_commands = ("send", "transfer")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.engines: list[_Engine] = []
        self.senders: dict[int, _Sender] = {}               # table id -> sender
        self.results: collections.OrderedDict[int, dict] = collections.OrderedDict()
        self._key = ctx.tag_key
        self._rx_hpcc: dict[str, Any] = {}    # the receivers' [hpcc] (Rx-HPCC)
        self.started_flows = 0

    # ---- lifecycle ----

    def start(self) -> None:
        cfg = self.ctx.config
        # flow slots of each engine: limits.max_flows, rounded up to the power
        # of two the engine's tables take (include/hpccd/transport.h)
        slots = min(max(1 << (cfg.max_flows - 1).bit_length(), tp_mod.lib.HPCCD_TP_FLOWS_MIN),
                    tp_mod.lib.HPCCD_TP_FLOWS_MAX)
        rx_hpcc = self._rx_hpcc = dict(cfg.params.get("hpcc", {}))
        for att in self.ctx.interfaces.values():
            for k, q in enumerate(att.queues):
                t = tp_mod.Transport(
                    att.name, q, attach_xdp=False, mode=ENGINE_MODE, ack_every=cfg.ack_every,
                    cpu=att.cpus[k] if att.cpus else None,
                    tag_key=self._key or bytes(16), notify=cfg.rx_notify, rx_hpcc=rx_hpcc,
                    csum_offload=cfg.tx_csum_offload,
                    config={"frame_size": cfg.frame_bytes,
                            **tp_mod.umem_frames(cfg.umem_bytes, cfg.frame_bytes),
                            "udp_port": cfg.udp_port,
                            "max_flows": slots, "rx_flows": slots,
                            "probe_dscp": cfg.probe_dscp})
                e = _Engine(att.name, att.ifindex, q, t)
                self.engines.append(e)          # before the map: stop() undoes both
                att.xdp_map("hpccd_xsks").update(q, t.fd)
                self.log.info("engine on %s queue %d: %d UMEM frames of %d bytes", att.name,
                              q, cfg.umem_bytes // cfg.frame_bytes, cfg.frame_bytes)
        if not self.engines:
            raise ComponentError("transport: no interface has queues")

    def stop(self) -> None:
        for s in list(self.senders.values()):
            self._end_sender(s, aborted=True)
        for e in self.engines:
            att = self.ctx.interfaces.get(e.iface)
            if att is not None:
                try:
                    att.xdp_map("hpccd_xsks").delete(e.queue)
                except OSError:
                    pass
            for fid in e.receivers.values():
                try:
                    self.ctx.flows.finish(fid, completed=False)
                except KeyError:
                    pass
            e.receivers.clear()
            e.tp.close()
        self.engines.clear()

    def healthy(self) -> bool:
        for e in self.engines:
            st = e.tp.stats()
            if not st["running"] or st["thread_err"]:
                return False
        return bool(self.engines)

    def apply_config(self, new) -> None:
        key = new.read_key()
        if key != self._key:
            for e in self.engines:
                e.tp.set_tag_key(key or bytes(16))
            self._key = key
        # [hpcc] is reloadable for the flows that start afterwards
        # (docs/configuration.md): the receivers' Rx-HPCC too, not only the
        # senders' (checked by the configuration's validation already)
        rx_hpcc = dict(new.params.get("hpcc", {}))
        if rx_hpcc != self._rx_hpcc:
            for e in self.engines:
                e.tp.set_rx_hpcc(rx_hpcc)
            self._rx_hpcc = rx_hpcc

    def status(self) -> dict[str, Any]:
        out = []
        for e in self.engines:
            st = e.tp.stats()
            out.append({"engine": e.name, "running": bool(st["running"]),
                        "zerocopy": bool(st["zerocopy"]), "rx_frames": st["rx_frames"],
                        "tx_frames": st["tx_frames"], "receivers": len(e.receivers)})
        return {"engines": out, "senders": len(self.senders),
                "flows_started": self.started_flows}

    # ---- publishing ----

    def poll(self, now: float) -> float | None:
        """Publish the engines' and flows' state.  Idle (no sender flow,
        no receiver flow and no frame moved since the last poll) it asks to
        be polled less and less often, up to once a second
        (hpccd.agent.component.idle_backoff): an idle daemon's cost does not grow
        with time."""
        busy = bool(self.senders)
        for e in self.engines:
            busy |= self._poll_engine(e)
        for s in list(self.senders.values()):
            self._poll_sender(s)
        self._idle = idle_backoff(getattr(self, "_idle", None), self.poll_interval, busy)
        return self._idle

    def _drop(self, store: dict[str, int], key: str, cause: str, total: int) -> None:
        d = total - store[key]
        if d > 0:
            self.ctx.flows.drop("transport", cause, d)
        store[key] = total

    def _poll_engine(self, e: _Engine) -> bool:
        """Returns whether the engine is busy: frames moved since the last
        poll, or receiver flows it still holds."""
        st = e.tp.stats()
        for k, cause in ENGINE_DROPS.items():
            self._drop(e.drops, k, cause, st[k])
        self._drop(e.drops, "malformed", "malformed", sum(st["by_class"].values()))
        frames, e.frames = e.frames, (st["rx_frames"], st["tx_frames"])
        if frames == e.frames and not e.receivers:
            return False                 # no frame since: no receiver flow to read
        cfg = self.ctx.config
        done = []
        for r in e.tp.rx_flows():
            key = (r.saddr, r.flow_id)
            fid = e.receivers.get(key)
            fields = dict(bytes_acked=r.bytes, notify_sent=r.stats["windows_sent"],
                          extra={"engine": e.name, "crc32": r.crc32, "packets": r.stats["pkts"],
                                 "out_of_order": r.stats["ooo_pkts"],
                                 "duplicates": r.stats["dup_pkts"], "ce": r.stats["ce_pkts"]})
            if fid is None:
                if r.done and r.bytes == 0:
                    continue
                pol = cfg.policy(r.saddr)
                try:
                    fid = self.ctx.flows.add(
                        kind="native", role="receiver", saddr=e.tp.local_addr,
                        sport=e.tp.udp_port, daddr=r.saddr, dport=r.sport, proto=17,
                        peer=pol.peer, algorithm=RECEIVER_ALGORITHM, component=self.name,
                        engine=e.name, **fields).id
                except FlowLimitError:
                    continue
                e.receivers[key] = fid
            else:
                self.ctx.flows.update(fid, **fields)
            self._observe_int(fid, r.stats)
            if r.done:
                self.ctx.flows.finish(fid, completed=True, fct_s=r.fct_s)
                done.append(key)
                self._keep(fid, {"role": "receiver", "id": fid, "engine": e.name,
                                 "peer": r.saddr, "sport": r.sport, "flow_id": r.flow_id,
                                 "state": "done", "bytes": r.bytes, "crc32": r.crc32,
                                 "err": r.err, "fct_s": r.fct_s, "packets": r.stats["pkts"],
                                 "windows_sent": r.stats["windows_sent"]})
        if done:
            e.tp.rx_reap()
            for k in done:
                e.receivers.pop(k, None)
        return True

    def _observe_int(self, fid: int, st: dict[str, Any]) -> None:
        """The last INT the flow's HPCC core took (a sender's INT-echo ACK or
        probe response, a receiver's NewINT) into hpccd_int_hop_*."""
        for i, h in enumerate(st.get("int_hops", ())):
            self.ctx.flows.observe_hop_rec(fid, st["int_path_id"], i, h["ts_ns"],
                                           h["tx_bytes"], h["qlen_bytes"], h["bw_bps"])

    @staticmethod
    def _fields(r: tp_mod.FlowResult) -> dict[str, Any]:
        st = r.stats
        d: dict[str, Any] = dict(
            window_bytes=st["window_bytes"], rate_bps=st["rate_bps"],
            inflight_bytes=st["snd_nxt"] - st["snd_una"],
            rtt_s=st["srtt_ns"] / 1e9 if st["srtt_ns"] else None,
            probe_rtt_s=st["probe_srtt_ns"] / 1e9 if st["probe_srtt_ns"] else None,
            bytes_sent=st["wire_bytes"], payload_sent=st["snd_max"], bytes_acked=st["snd_una"],
            retx_packets=st["retx_pkts"], retx_bytes=st["retx_bytes"],
            probes_sent=st["probes_sent"], probes_answered=st["probes_answered"],
            probes_lost=st["probes_lost"], notify_received=st["rx_windows"],
            extra={"state": r.state, "engine_flow_id": r.flow_id, "packets": st["pkts"],
                   "go_backs": st["go_backs"], "rtos": st["rtos"],
                   "cc_updates": st["cc_updates"], "probes_late": st["probes_late"],
                   "min_rtt_s": st["min_rtt_ns"] / 1e9,
                   # where sending time went: held by W; lost to a late engine
                   "window_limited_s": st["wnd_limited_ns"] / 1e9,
                   "pacing_lost_s": st["pace_lost_ns"] / 1e9})
        if r.algo in ("hpcc", "rx-hpcc"):
            d["U"] = st["U"]
        elif r.algo in ("dctcp", "dcqcn"):        # DCTCP's and DCQCN's alpha
            d["alpha"] = st["U"]
        elif r.algo == "ldcp":
            d["cw_pkts"] = st["U"]
        else:                                     # TIMELY's gradient: no gauge
            d["extra"]["gradient"] = st["U"]
        d["extra"]["cnps"] = st["cnps"]
        return d

    def _poll_sender(self, s: _Sender) -> None:
        r = s.flow.stats()
        for k, cause in FLOW_DROPS.items():
            self._drop(s.drops, k, cause, r.stats[k])
        fields = self._fields(r)
        self.ctx.flows.update(s.fid, **fields)
        self._observe_int(s.fid, r.stats)
        if r.stats["srtt_ns"] or r.stats["probe_srtt_ns"]:
            self.ctx.flows.observe_rtt(s.fid, fields["rtt_s"], fields["probe_rtt_s"])
        if r.state in ("done", "failed"):
            self._end_sender(s, result=r)

    def _end_sender(self, s: _Sender, result: tp_mod.FlowResult | None = None,
                    aborted: bool = False) -> None:
        r = result or s.flow.stats()
        fields = self._fields(r)
        completed = r.state == "done" and not aborted
        self.ctx.flows.finish(s.fid, completed=completed, fct_s=r.fct_s, **fields)
        res = {**s.info, "role": "sender", "id": s.fid,
               "state": "aborted" if aborted and r.state == "running"
               else r.state, "err": r.err, "fct_s": r.fct_s, "goodput_bps": r.goodput_bps,
               "bytes_acked": r.stats["snd_una"], "wire_bytes": r.stats["wire_bytes"],
               "packets": r.stats["pkts"], "retx_packets": r.stats["retx_pkts"],
               "probes_sent": r.stats["probes_sent"],
               "probes_answered": r.stats["probes_answered"],
               "probes_lost": r.stats["probes_lost"], "rx_windows": r.stats["rx_windows"],
               "srtt_s": r.stats["srtt_ns"] / 1e9}
        self._keep(s.fid, res)
        self.senders.pop(s.fid, None)
        s.flow.close()

    def _keep(self, fid: int, res: dict) -> None:
        self.results[fid] = res
        while len(self.results) > RESULTS_KEPT:
            self.results.popitem(last=False)

    def engines_info(self) -> list[tuple[str, int, int, int]]:
        """(interface, queue, sender flows running, receiver flows live) per
        engine: the metrics' hpccd_engine_flows."""
        out = []
        for e in self.engines:
            try:
                st = e.tp.stats()
            except OSError:
                continue
            out.append((e.iface, e.queue, st["flows_running"], st["rx_live"]))
        return out

    # ---- control ----

    def control(self, cmd: str, args: dict) -> Any:
        if cmd == "send":
            return self._send(args)
        return self._transfer(args)

    def _engine_for(self, peer: str) -> _Engine:
        oif = None
        try:
            from pyroute2 import IPRoute

            with IPRoute() as ipr:
                routes = ipr.route("get", dst=peer)
                oif = routes[0].get_attr("RTA_OIF") if routes else None
        except Exception:                           # no route: the first engine says so
            pass
        mine = [e for e in self.engines if e.ifindex == oif] or self.engines[:1]
        # several queues: the engine with the fewest running flows
        return min(mine, key=lambda e: e.tp.stats()["flows_running"])

    def _send(self, args: dict) -> dict[str, Any]:
        cfg = self.ctx.config
        peer, nbytes, algo = args.get("peer"), args.get("bytes"), args.get("algo")
        try:
            ipaddress.IPv4Address(peer)
        except (ipaddress.AddressValueError, ValueError, TypeError):
            raise ControlError(f"send: peer {peer!r} is not an IPv4 address") from None
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
            raise ControlError(f"send: bytes {nbytes!r}: a positive integer")
        if algo is not None and algo not in tp_mod.ALGOS:
            raise ControlError(f"send: algorithm {algo!r}, one of {sorted(tp_mod.ALGOS)}")
        pol = cfg.policy(peer, algo)
        if pol.algorithm == "dctcp" and not pol.dctcp_endpoint:
            raise ControlError(f"send: {peer} ({pol.peer} peers) is not a DCTCP endpoint: DCTCP "
                               f"must only be used between DCTCP endpoints ([DCTCP] section 4)")
        params = dict(pol.params)
        row = algorithms.ALGORITHMS[pol.algorithm]
        table = row.table
        hpcc = dict(cfg.policy(peer, "hpcc").params)
        line = int(hpcc.get("line_rate_bps", 100_000_000_000))
        inband: str | int = "every" if cfg.inband_every == 1 else cfg.inband_every
        if row.int_feedback == "sender":
            int_mode = "probe" if cfg.probe_mode == "probe" else inband
        elif row.int_feedback == "receiver":
            int_mode = inband
        else:
            int_mode = "none"
        if table == "dctcp" and "g" in params:         # the core's scaled form
            params["g_shift"] = cc.dctcp_g_shift(params.pop("g"))
        e = self._engine_for(peer)
        try:
            flow = e.tp.open_flow(peer, nbytes, algo=pol.algorithm, int_mode=int_mode,
                                  line_rate_bps=line, probe_timeout_ns=cfg.probe_timeout_us * 1000,
                                  **{table: params})
        except (OSError, ValueError) as err:
            raise ControlError(f"send: {err}") from None
        info = {"peer": peer, "peer_label": pol.peer, "algorithm": pol.algorithm,
                "int_mode": int_mode, "bytes": nbytes, "engine": e.name,
                "engine_flow_id": flow.flow_id, "sport": flow.sport, "seed": flow.seed,
                "crc32": tp_mod.pattern_crc32(flow.seed, nbytes)}
        try:
            f = self.ctx.flows.add(kind="native", role="sender", saddr=e.tp.local_addr,
                                   sport=flow.sport, daddr=peer, dport=e.tp.udp_port, proto=17,
                                   peer=pol.peer, algorithm=pol.algorithm, component=self.name,
                                   engine=e.name)
        except FlowLimitError as err:
            flow.close()
            raise ControlError(f"send: {err}") from None
        self.senders[f.id] = _Sender(f.id, e, flow, info)
        self.started_flows += 1
        return {"id": f.id, **info}

    def _transfer(self, args: dict) -> dict[str, Any]:
        if args.get("id") is None:           # every flow that ended, both roles
            return {"results": list(self.results.values()),
                    "running": [{**s.info, "role": "sender", "id": fid}
                                for fid, s in self.senders.items()]}
        try:
            fid = int(args.get("id"))
        except (TypeError, ValueError):
            raise ControlError(f"transfer: id {args.get('id')!r} is not a number") from None
        s = self.senders.get(fid)
        if s is not None:
            r = s.flow.stats()
            if r.state != "running":         # ended since the last poll: publish it now
                self._poll_sender(s)
                return self.results[fid]
            return {**s.info, "role": "sender", "id": fid, "state": r.state,
                    "bytes_acked": r.stats["snd_una"]}
        if fid in self.results:
            return self.results[fid]
        raise ControlError(f"transfer: no native flow {fid} sent through this daemon "
                           f"(the last {RESULTS_KEPT} are kept)")


COMPONENT = TransportComponent
