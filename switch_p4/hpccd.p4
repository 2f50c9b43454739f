/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hpccd switch: an IPv4 router that stamps HPCC INT hop records and marks
 * ECN with WRED.  P4_16 for v1model: compiled with p4c-bm2-ss, run in BMv2
 * simple_switch (docs/switch.md says how, step by step).
 *
 *   p4c-bm2-ss --std p4-16 --arch v1model -o build/p4/hpccd.json \
 *       --p4runtime-files build/p4/hpccd.p4info.txtpb switch_p4/hpccd.p4
 *
 * The wire format is docs/wire-format.md (include/hpccd/wire.h and
 * int_hop.h); the header declarations below follow it field by field and
 * tests/unit/test_p4.py checks them against the C headers.  The
 * control-plane configuration (routes, switch id, port speeds, buffers,
 * marking thresholds) is generated from the lab's topology file by
 * switch_p4/gen_runtime.py; every table, action and counter the control
 * plane names is declared here with an absolute @name, so that the names do
 * not depend on how the controls nest.
 *
 * It behaves like the lab's software INT switch (ebpf/int_switch.bpf.c).
 * The marking and the fast-start drop are decided where a packet joins its
 * egress queue (end of ingress in v1model: queue admission), on the queue
 * as the packet finds it.  The hop record describes the egress port "when
 * the packet is emitted" ([HPCC] section 4.1): it is written in egress,
 * after the queue, with the time the packet left it, the bytes the port has
 * sent including this packet and the bytes left queued behind it.
 * docs/switch.md has the mapping and the reasons.
 *
 * What a hardware port touches: the parts marked "v1model" -- the byte
 * accounting of the egress queues (two registers and the actions that use
 * them), the timestamp of the sample, the checksum controls, the package,
 * and the random and hash externs.  IntStamp (the INT logic with its
 * checksum update) and Wred (the marking and drop decision) take plain
 * values and read no v1model metadata.
 *
 * Sections: constants and types | headers | functions | parser | checksum |
 * queue management (Wred) | ingress | egress (IntStamp, SwitchEgress) |
 * deparser | package.
 */
#include <core.p4>
#include <v1model.p4>

/* ==== constants and types ================================================ */

/* Compile-time settings (p4c-bm2-ss -DHPCCD_UDP_PORT=...), the defaults of
 * include/hpccd/wire.h. */
#ifndef HPCCD_UDP_PORT
#define HPCCD_UDP_PORT 18471        /* HPCCD_UDP_PORT_DEFAULT */
#endif
#ifndef HPCCD_PROBE_DSCP
#define HPCCD_PROBE_DSCP 45         /* HPCCD_PROBE_DSCP_DEFAULT */
#endif
#define HPCCD_INT_MAX_HOPS 8        /* largest room a sender may reserve */
#define HPCCD_PORTS 512             /* v1model ports are 9 bits */

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_t;             /* v1model egress_spec / egress_port */
typedef bit<32> bytes_t;            /* byte counts and thresholds */
typedef bit<12> switch_id_t;        /* 12-bit switch id, XORed into pathID */
typedef bit<12> path_id_t;
typedef bit<4>  int_flags_t;
typedef bit<5>  speed_code_t;       /* B: HPCCD_INT_SPEED_BITS */
typedef bit<24> hop_ts_t;           /* TS, ns mod 2^24: HPCCD_INT_TS_BITS */
typedef bit<20> hop_tx_t;           /* txBytes, 128 B units: HPCCD_INT_TX_BITS */
typedef bit<15> hop_qlen_t;         /* qLen, 80 B units: HPCCD_INT_QLEN_BITS */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<8>  IPPROTO_TCP = 6;
const bit<8>  IPPROTO_UDP = 17;

const bit<4>      INT_MAGIC = 0xC;          /* HPCCD_INT_MAGIC */
const bit<4>      WIRE_VERSION = 1;         /* HPCCD_WIRE_VERSION */
const int_flags_t INT_F_COLLECT = 0x8;      /* HPCCD_INT_F_COLLECT */
const int_flags_t INT_F_OVERFLOW = 0x4;     /* HPCCD_INT_F_OVERFLOW */
const bit<4>      HPCCD_T_MIN = 1;          /* HPCCD_T_DATA */
const bit<4>      HPCCD_T_MAX = 7;          /* HPCCD_T_MAX (CNP) */

const hop_qlen_t  QLEN_MAX = 0x7fff;        /* HPCCD_INT_QLEN_MAX: saturates */
const bit<64>     QLEN_SAT_BYTES = 2621360; /* QLEN_MAX x 80: at or above, qLen = QLEN_MAX */
/* floor(q / 80) = (q x 838861) >> 26, exact for every q below
 * QLEN_SAT_BYTES + 80 (checked exhaustively when the constant was chosen):
 * no division on the data path. */
const bit<64>     QLEN_DIV80_MUL = 838861;
const bit<8>      QLEN_DIV80_SHIFT = 26;   /* bit<8>: BMv2 takes shift amounts of at most 8 bits */

/* Ingress drop reasons: the index of the ingress_drops counter. */
const bit<32> DROP_PARSER = 0;      /* malformed IPv4 header */
const bit<32> DROP_IPV4_CSUM = 1;   /* IPv4 header checksum wrong */
const bit<32> DROP_NOT_IPV4 = 2;    /* this switch routes IPv4 only */
const bit<32> DROP_TTL = 3;         /* TTL would reach 0 */
const bit<32> DROP_NO_ROUTE = 4;    /* no ipv4_lpm / ecmp_group entry */
const bit<32> DROP_BUFFER = 5;      /* the egress port's byte buffer is full (buf_max) */
const bit<32> DROP_FAST_START = 6;  /* Wred: ECN-incapable, fast-start class, q >= K */
#define DROP_REASONS 8

/* What IntStamp did (stamp_result_t); same values as enum hpccd_stamp. */
typedef bit<2> stamp_result_t;
const stamp_result_t STAMP_WRITTEN = 0;     /* record written at nHop */
const stamp_result_t STAMP_OVERFLOW = 1;    /* nHop == room: counted, OVERFLOW set */
const stamp_result_t STAMP_SKIP = 2;        /* not stamped (COLLECT clear, no switch id) */

/* What Wred decided (wred_verdict_t). */
typedef bit<2> wred_verdict_t;
const wred_verdict_t WRED_PASS = 0;
const wred_verdict_t WRED_MARK = 1;         /* ECN set to CE (or already CE) */
const wred_verdict_t WRED_DROP = 2;         /* ECN-incapable, fast-start class, q >= K */

/* The fast-start class (wred_set's fs_class), the bits of the lab switch's
 * HPCCD_SW_F_FS_* (include/hpccd/kern_user.h) shifted down. */
typedef bit<8> fs_class_t;
const fs_class_t FS_HPCCD = 0x1;            /* hpccd native: UDP to or from the hpccd port */
const fs_class_t FS_DSCP = 0x2;             /* DSCP == fs_dscp */
const fs_class_t FS_ALL = 0x4;              /* every IPv4 packet */

/* Parser errors.  The hpccd ones are the classes of enum hpccd_wire_err, in
 * the order the parser checks them (docs/wire-format.md "Malformed
 * packets"); ingress turns them back into the numbers. */
error {
    Ipv4Version,            /* not version 4 */
    Ipv4HeaderLength,       /* ihl < 5 */
    Ipv4TotalLength,        /* total length < header */
    HpccdIntTruncated,      /*  1 HPCCD_E_INT_TRUNC */
    HpccdMagic,             /*  2 HPCCD_E_MAGIC */
    HpccdIntVersion,        /*  3 HPCCD_E_INT_VERSION */
    HpccdRoom,              /*  4 HPCCD_E_ROOM */
    HpccdNhop,              /*  5 HPCCD_E_NHOP */
    HpccdHopsTruncated,     /*  6 HPCCD_E_HOPS_TRUNC */
    HpccdHdrTruncated,      /*  7 HPCCD_E_HDR_TRUNC */
    HpccdVersion,           /*  8 HPCCD_E_VERSION */
    HpccdType,              /*  9 HPCCD_E_TYPE */
    HpccdLen                /* 10 HPCCD_E_LEN */
}

/* ==== headers ============================================================ */

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header vlan_t {                     /* one 802.1Q tag, as the host parsers accept */
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;                /* 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE */
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header ipv4_options_t {             /* (ihl - 5) x 4 bytes */
    varbit<320> options;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;               /* 0: none (stays 0) */
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;                 /* TCP-side probe: the probe number */
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<3>  reserved;
    bit<9>  flags;                  /* AE CWR ECE URG ACK PSH RST SYN FIN; 0 for a probe */
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header tcp_options_t {              /* (data_offset - 5) x 4 bytes */
    varbit<320> options;
}

/* struct hpccd_int_hdr (4 bytes).  The C struct has two bytes and one
 * 16-bit word; here each is split into the fields it packs:
 *   magic_ver  = magic << 4 | ver
 *   nhop_room  = nhop << 4 | room
 *   path_flags = flags << 12 | path_id */
header hpccd_int_t {
    bit<4>      magic;              /* HPCCD_INT_MAGIC */
    bit<4>      ver;                /* HPCCD_WIRE_VERSION */
    bit<4>      nhop;               /* hop records written so far */
    bit<4>      room;               /* hop records reserved, 0..8 */
    int_flags_t flags;              /* COLLECT 0x8, OVERFLOW 0x4 */
    path_id_t   path_id;            /* XOR of the ids of the switches that stamped */
}

/* struct hpccd_int_hop_wire (8 bytes): one 64-bit big-endian word, most
 * significant field first (include/hpccd/int_hop.h).  There is no room for
 * a switch id or a port in the record: the switch id enters pathID. */
header hpccd_hop_t {
    speed_code_t speed_code;        /* B, bits 63..59 */
    hop_ts_t     ts;                /* TS, bits 58..35 */
    hop_tx_t     tx_units;          /* txBytes, bits 34..15 */
    hop_qlen_t   qlen_units;        /* qLen, bits 14..0 */
}

/* struct hpccd_hdr (32 bytes); ver_type = ver << 4 | msg_type. */
header hpccd_hdr_t {
    bit<4>  ver;
    bit<4>  msg_type;               /* enum hpccd_type, 1..7 */
    bit<8>  flags;
    bit<16> len;                    /* bytes after this header */
    bit<32> flow_id;
    bit<32> seq_hi;
    bit<32> seq_lo;
    bit<32> ack_hi;
    bit<32> ack_lo;
    bit<32> ts;
    bit<32> aux;
}

struct headers_t {
    ethernet_t     ethernet;
    vlan_t         vlan;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    udp_t          udp;
    tcp_t          tcp;
    tcp_options_t  tcp_options;
    hpccd_int_t    int_hdr;
    hpccd_hop_t[HPCCD_INT_MAX_HOPS] hops;   /* the first `room` are valid */
    hpccd_hdr_t    hpccd;
}

/* The values IntStamp writes into a hop record, computed by the
 * architecture-specific part of egress. */
struct hop_sample_t {
    switch_id_t  switch_id;
    speed_code_t speed_code;
    hop_ts_t     ts;
    hop_tx_t     tx_units;
    hop_qlen_t   qlen_units;
}

struct metadata_t {
    /* parser */
    bit<32>      l4_off;            /* frame offset of the L4 payload parsed so far */
    bit<32>      ip_payload;        /* IPv4 total length - header */
    bit<32>      tcp_hlen;          /* TCP data offset x 4 */
    bit<32>      rg_l4;             /* L4 payload bytes the UDP length (TCP: IPv4) announces */
    bit<32>      rg_ip;             /* L4 payload bytes inside the IPv4 total length */
    bit<32>      rg_frame;          /* L4 payload bytes in the frame */
    bit<32>      need;              /* bytes the hpccd headers parsed so far announce */
    bit<1>       too_short;         /* scratch: a length check failed */
    bit<4>       hops_left;         /* hop records still to extract */
    bit<16>      l4_sport;          /* 0 unless UDP or TCP */
    bit<16>      l4_dport;
    bit<1>       hpccd_udp;         /* UDP to or from the hpccd port (valid or not) */
    bit<1>       hpccd_ok;          /* hpccd headers parsed and every check passed */
    /* ingress */
    bit<1>       fwd;               /* a forwarding entry matched */
    bit<16>      ecmp_group;
    bit<16>      ecmp_member;
    bytes_t      buffer_bytes;      /* the egress port's buffer (port_buffer) */
    /* the egress queue when the packet arrived at it (queue_sample): */
    bytes_t      q_enq_bytes;       /* bytes queued ahead of the packet */
    /* egress: the port when the packet left the queue (queue_release) */
    bytes_t      q_deq_bytes;       /* bytes left queued behind the packet */
    bytes_t      tx_deq_bytes;      /* bytes the port has sent, this packet included, mod 2^32 */
    switch_id_t  switch_id;
    speed_code_t speed_code;
}

/* v1model: per-port byte accounting, shared by ingress and egress (hence
 * instantiated at the top level).  Indexed by port; every access is a
 * read-modify-write inside one action, which BMv2 executes under the
 * register's lock. */

/* Bytes in each egress queue (Ethernet frame bytes, no FCS): + in ingress
 * when a packet is admitted (queue_add), - in egress when it has left the
 * queue (queue_release).  The byte backlog that v1model does not give
 * (enq_qdepth/deq_qdepth count packets). */
register<bytes_t>(HPCCD_PORTS) queue_bytes;

/* Bytes transmitted by each egress port (frame bytes, no FCS), mod 2^32:
 * + in egress for every packet that leaves the switch (queue_release), as a
 * qdisc counts at dequeue.  The hop record carries bits 26..7 (128-byte
 * units, mod 2^20), which the 2^32 wrap-around does not disturb. */
register<bytes_t>(HPCCD_PORTS) tx_bytes;

/* ==== functions: one's complement arithmetic (RFC 1071, RFC 1624) ====== */

/* End-around carry of a 32-bit accumulator of 16-bit words. */
bit<16> csum_fold(in bit<32> sum) {
    bit<32> s = (sum & 0xffff) + (sum >> 16);
    s = (s & 0xffff) + (s >> 16);
    return (bit<16>)s;
}

/* RFC 1624 eqn 3 over several words: HC' = ~(~HC + ~m + m'), where m and m'
 * are the sums of the old and the new words. */
bit<16> csum_replace(in bit<16> hc, in bit<32> sum_old, in bit<32> sum_new) {
    bit<32> acc = (bit<32>)(~hc) + (bit<32>)(~csum_fold(sum_old)) + (bit<32>)csum_fold(sum_new);
    return ~csum_fold(acc);
}

/* Sum of the two 16-bit words of the INT header. */
bit<32> int_words(in hpccd_int_t h) {
    bit<16> w0 = h.magic ++ h.ver ++ h.nhop ++ h.room;
    bit<16> w1 = h.flags ++ h.path_id;
    return (bit<32>)w0 + (bit<32>)w1;
}

/* Sum of the four 16-bit words of a hop record. */
bit<32> hop_words(in hpccd_hop_t h) {
    bit<64> w = h.speed_code ++ h.ts ++ h.tx_units ++ h.qlen_units;
    return (bit<32>)w[63:48] + (bit<32>)w[47:32] + (bit<32>)w[31:16] + (bit<32>)w[15:0];
}

/* ==== parser ============================================================= */

/* Ethernet (one optional 802.1Q tag), IPv4 (options too), then
 *  - UDP with the hpccd port as source or destination: INT header, room hop
 *    records, hpccd header;
 *  - TCP with the probe DSCP, no TCP flag and a payload starting with the INT
 *    magic (a TCP-side probe or its response): the same after the TCP header;
 *  - anything else: accepted as it is, forwarded untouched.
 * The hpccd part checks the faults of docs/wire-format.md "Malformed
 * packets" in their order with verify(); every length is judged against the
 * L4 payload region: the smallest of what the UDP length (TCP: the IPv4
 * total length) announces, what the IPv4 total length holds and what the
 * frame holds (Ethernet padding is never part of it).  The three bounds are
 * kept apart (rg_l4, rg_ip, rg_frame) and checked together, so no minimum
 * has to be computed in the parser. */
parser SwitchParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        meta.l4_off = 14;
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan);
        meta.l4_off = 18;
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.Ipv4Version);
        verify(hdr.ipv4.ihl >= 5, error.Ipv4HeaderLength);
        verify((bit<32>)hdr.ipv4.total_len >= ((bit<32>)hdr.ipv4.ihl) << 2, error.Ipv4TotalLength);
        meta.l4_off = meta.l4_off + (((bit<32>)hdr.ipv4.ihl) << 2);
        meta.ip_payload = (bit<32>)hdr.ipv4.total_len - (((bit<32>)hdr.ipv4.ihl) << 2);
        transition select(hdr.ipv4.ihl) {
            5: parse_l4;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        pkt.extract(hdr.ipv4_options, (((bit<32>)hdr.ipv4.ihl) - 5) << 5);
        transition parse_l4;
    }

    state parse_l4 {
        /* A fragment other than the first has no L4 header: not ours. */
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IPPROTO_UDP): check_udp;
            (0, IPPROTO_TCP): check_tcp;
            default: accept;
        }
    }

    /* ---- UDP ---- */

    state check_udp {
        /* the UDP header must lie inside the IPv4 payload */
        meta.too_short = (bit<1>)((meta.ip_payload - 8) >> 31);
        transition select(meta.too_short) {
            0: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_sport = hdr.udp.src_port;
        meta.l4_dport = hdr.udp.dst_port;
        meta.l4_off = meta.l4_off + 8;
        transition select(hdr.udp.length) {
            0 &&& 0xfff8: accept;           /* UDP length < 8: not a datagram */
            default: udp_port;
        }
    }

    state udp_port {
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (HPCCD_UDP_PORT, _): hpccd_udp;
            (_, HPCCD_UDP_PORT): hpccd_udp;
            default: accept;
        }
    }

    state hpccd_udp {
        meta.hpccd_udp = 1;
        meta.rg_l4 = (bit<32>)hdr.udp.length - 8;
        meta.rg_ip = meta.ip_payload - 8;
        meta.rg_frame = smeta.packet_length - meta.l4_off;
        transition parse_int;
    }

    /* ---- TCP: only TCP-side probes go further than the fixed header ---- */

    state check_tcp {
        meta.too_short = (bit<1>)((meta.ip_payload - 20) >> 31);
        transition select(meta.too_short) {
            0: parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.src_port;
        meta.l4_dport = hdr.tcp.dst_port;
        meta.tcp_hlen = ((bit<32>)hdr.tcp.data_offset) << 2;
        meta.l4_off = meta.l4_off + meta.tcp_hlen;
        /* the whole TCP header (options too) inside the IPv4 payload and the frame */
        meta.too_short = (bit<1>)((meta.ip_payload - meta.tcp_hlen) >> 31)
                   | (bit<1>)((smeta.packet_length - meta.l4_off) >> 31);
        transition select(hdr.ipv4.dscp, hdr.tcp.flags, meta.too_short, hdr.tcp.data_offset) {
            (HPCCD_PROBE_DSCP, 0, 0, 0 &&& 0xc): accept;   /* data offset 0..3: not TCP */
            (HPCCD_PROBE_DSCP, 0, 0, 4): accept;
            (HPCCD_PROBE_DSCP, 0, 0, 5): tcp_probe_region;
            (HPCCD_PROBE_DSCP, 0, 0, _): parse_tcp_options;
            default: accept;
        }
    }

    state parse_tcp_options {
        pkt.extract(hdr.tcp_options, (meta.tcp_hlen - 20) << 3);
        transition tcp_probe_region;
    }

    state tcp_probe_region {
        meta.rg_l4 = meta.ip_payload - meta.tcp_hlen;   /* TCP has no length of its own */
        meta.rg_ip = meta.rg_l4;
        meta.rg_frame = smeta.packet_length - meta.l4_off;
        /* at least one payload byte, to look for the INT magic */
        meta.too_short = (bit<1>)((meta.rg_l4 - 1) >> 31) | (bit<1>)((meta.rg_frame - 1) >> 31);
        transition select(meta.too_short) {
            0: tcp_probe_magic;
            default: accept;
        }
    }

    state tcp_probe_magic {
        transition select(pkt.lookahead<bit<8>>()) {
            0xc0 &&& 0xf0: parse_int;       /* INT magic in the high nibble */
            default: accept;
        }
    }

    /* ---- hpccd: the checks of enum hpccd_wire_err, in order ---- */

    state parse_int {
        verify(meta.rg_l4 >= 4 && meta.rg_ip >= 4 && meta.rg_frame >= 4,
               error.HpccdIntTruncated);
        pkt.extract(hdr.int_hdr);
        verify(hdr.int_hdr.magic == INT_MAGIC, error.HpccdMagic);
        verify(hdr.int_hdr.ver == WIRE_VERSION, error.HpccdIntVersion);
        verify(hdr.int_hdr.room <= HPCCD_INT_MAX_HOPS, error.HpccdRoom);
        verify(hdr.int_hdr.nhop <= hdr.int_hdr.room, error.HpccdNhop);
        meta.need = 4 + (((bit<32>)hdr.int_hdr.room) << 3);
        verify(meta.rg_l4 >= meta.need && meta.rg_ip >= meta.need && meta.rg_frame >= meta.need,
               error.HpccdHopsTruncated);
        meta.hops_left = hdr.int_hdr.room;
        transition parse_hops;
    }

    /* Exactly `room` records (room <= 8 was verified, so the stack of 8 never
     * overflows). */
    state parse_hops {
        transition select(meta.hops_left) {
            0: parse_hpccd;
            default: parse_hop;
        }
    }

    state parse_hop {
        pkt.extract(hdr.hops.next);
        meta.hops_left = meta.hops_left - 1;
        transition parse_hops;
    }

    state parse_hpccd {
        meta.need = meta.need + 32;
        verify(meta.rg_l4 >= meta.need && meta.rg_ip >= meta.need && meta.rg_frame >= meta.need,
               error.HpccdHdrTruncated);
        pkt.extract(hdr.hpccd);
        verify(hdr.hpccd.ver == WIRE_VERSION, error.HpccdVersion);
        verify(hdr.hpccd.msg_type >= HPCCD_T_MIN && hdr.hpccd.msg_type <= HPCCD_T_MAX,
               error.HpccdType);
        /* len == the bytes after the header in the region: every bound holds
         * them and the smallest bound is exactly them */
        meta.need = meta.need + (bit<32>)hdr.hpccd.len;
        verify(meta.rg_l4 >= meta.need && meta.rg_ip >= meta.need && meta.rg_frame >= meta.need
               && (meta.rg_l4 == meta.need || meta.rg_ip == meta.need
                   || meta.rg_frame == meta.need),
               error.HpccdLen);
        meta.hpccd_ok = 1;
        transition accept;
    }
}

/* ==== checksum =========================================================== */

/* v1model.  The IPv4 header checksum is verified on receipt (a wrong one is
 * dropped in ingress) and recomputed in full on the way out (TTL and ECN
 * change).  L4 checksums are never recomputed here: IntStamp patches them
 * incrementally, so a segment that arrived with a wrong checksum leaves
 * with a wrong checksum. */
control SwitchVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control SwitchComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

/* ==== queue management =================================================== */

/* WRED/ECN on the egress queue ([LDCP] section 2.1), decided when the
 * packet arrives at the queue, on the instantaneous queue q: the bytes
 * already queued ahead of it (DCTCP's "queue occupancy upon arrival").
 *   ECN-capable (ECT(0), ECT(1), CE): q < K_min no mark; K_min <= q < K_max
 *     CE with probability (q - K_min) / (K_max - K_min) x P_max; q >= K_max
 *     CE.  K_min = K_max is DCTCP's threshold marking.  A packet already CE
 *     stays CE and counts as marked.
 *   ECN-incapable, of the fast-start class: dropped when q >= K (LDCP's
 *     first-RTT packets are sent not-ECT, [LDCP] section 2.3).  Other
 *     ECN-incapable packets pass (only the buffer limit drops them).
 * The probability needs no division: the control plane gives
 *   pmax_slope = floor(P_max x 2^32 / (K_max - K_min))   (0 when K_min = K_max)
 * and p x 2^16 = ((q - K_min) x pmax_slope) >> 16, compared with a 16-bit
 * random number.  A port without a wred_profile entry neither marks nor
 * drops here.  Architecture-neutral but for the random extern.
 *
 * Applied where the packet joins its egress queue, which in v1model is the
 * end of ingress: a packet dropped here never takes buffer space or delays
 * the packets behind it, as with a switch's WRED and the lab switch (tc
 * egress, before the qdisc).  In the v1model egress pipeline the packet has
 * already been through the queue. */
control Wred(inout headers_t hdr, in bytes_t q, in port_t port, in bit<1> hpccd_native,
             out wred_verdict_t verdict) {
    bit<1>     enabled = 0;
    bytes_t    kmin = 0;
    bytes_t    kmax = 0;
    bit<48>    slope = 0;
    bytes_t    fast_start_k = 0;
    fs_class_t fs_class = 0;
    bit<6>     fs_dscp = 0;

    @name(".wred_set") action wred_set(bytes_t kmin_bytes, bytes_t kmax_bytes,
                                       bit<48> pmax_slope, bytes_t fast_start_k_bytes,
                                       fs_class_t fast_start_class, bit<6> fast_start_dscp) {
        enabled = 1;
        kmin = kmin_bytes;
        kmax = kmax_bytes;
        slope = pmax_slope;
        fast_start_k = fast_start_k_bytes;
        fs_class = fast_start_class;            /* 0: no fast-start drop */
        fs_dscp = fast_start_dscp;
    }

    @name(".wred_off") action wred_off() {
        enabled = 0;
    }

    @name(".wred_profile") table wred_profile {
        key = { port: exact; }
        actions = { wred_set; wred_off; }
        size = HPCCD_PORTS;
        default_action = wred_off();
    }

    apply {
        verdict = WRED_PASS;
        if (hdr.ipv4.isValid()) {
            wred_profile.apply();
            if (enabled == 1) {
                if (hdr.ipv4.ecn == 0) {
                    bool in_class = (fs_class & FS_ALL) != 0
                        || ((fs_class & FS_HPCCD) != 0 && hpccd_native == 1)
                        || ((fs_class & FS_DSCP) != 0 && hdr.ipv4.dscp == fs_dscp);
                    if (in_class && q >= fast_start_k) {
                        verdict = WRED_DROP;
                    }
                } else if (q >= kmax) {
                    verdict = WRED_MARK;
                } else if (q >= kmin) {
                    bit<16> r;
                    random(r, 16w0, 16w0xffff);     /* v1model extern */
                    bit<64> p16 = (((bit<64>)(q - kmin)) * (bit<64>)slope) >> 16;
                    if ((bit<64>)r < p16) {
                        verdict = WRED_MARK;
                    }
                }
                if (verdict == WRED_MARK) {
                    hdr.ipv4.ecn = 3;               /* CE */
                }
            }
        }
    }
}

/* ==== ingress ============================================================ */

/* Drops malformed IPv4, routes IPv4 by longest prefix (optionally over an
 * ECMP group chosen by the 5-tuple hash), decrements the TTL, then admits
 * the packet to its egress queue: samples the queue, applies Wred, drops at
 * the port's byte buffer, adds the packet's bytes.  A malformed hpccd packet
 * is counted (wire_errors) and forwarded untouched, as the lab switch does:
 * the switch does not judge the transport, the receiving host's XDP program
 * drops it. */
control SwitchIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t smeta) {
    Wred() wred;

    /* Packets dropped in ingress, by reason (DROP_*). */
    @name(".ingress_drops") counter(DROP_REASONS, CounterType.packets) ingress_drops;
    /* hpccd packets that failed the parser, by enum hpccd_wire_err (1..10);
     * forwarded untouched. */
    @name(".wire_errors") counter(16, CounterType.packets) wire_errors;
    /* Packets Wred marked CE (or found CE), per egress port. */
    @name(".wred_marked") counter(HPCCD_PORTS, CounterType.packets) wred_marked;

    action drop_counted(bit<32> reason) {
        ingress_drops.count(reason);
        mark_to_drop(smeta);
        meta.fwd = 0;
    }

    @name(".drop_no_route") action drop_no_route() {
        drop_counted(DROP_NO_ROUTE);
    }

    /* Next hop: egress port, this port's MAC, the next hop's MAC. */
    @name(".forward") action forward(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        smeta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        meta.fwd = 1;
    }

    /* ECMP: member = hash(5-tuple) mod members, looked up in ecmp_group.  A
     * TCP-side probe has its flow's 5-tuple, so it takes the flow's path. */
    @name(".ecmp_select") action ecmp_select(bit<16> group, bit<16> members) {
        meta.ecmp_group = group;
        hash(meta.ecmp_member, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport },
             members);
    }

    @name(".ipv4_lpm") table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { forward; ecmp_select; drop_no_route; }
        size = 1024;
        default_action = drop_no_route();
    }

    @name(".ecmp_group") table ecmp_group {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_member: exact;
        }
        actions = { forward; drop_no_route; }
        size = 1024;
        default_action = drop_no_route();
    }

    @name(".set_port_buffer") action set_port_buffer(bytes_t buffer_bytes) {
        meta.buffer_bytes = buffer_bytes;
    }

    /* buf_max of each egress port ([LDCP] section 2.1): the topology's
     * buffer_bytes.  A port not configured has no byte limit (only BMv2's
     * packet limit, set_queue_depth). */
    @name(".port_buffer") table port_buffer {
        key = { smeta.egress_spec: exact; }
        actions = { set_port_buffer; }
        size = HPCCD_PORTS;
        default_action = set_port_buffer(0xffffffff);
    }

    /* v1model: the egress queue as the packet finds it (for Wred and the
     * buffer limit; the hop record is taken at departure, in egress). */
    action queue_sample() {
        queue_bytes.read(meta.q_enq_bytes, (bit<32>)smeta.egress_spec);
    }

    /* v1model: the packet joins the queue (read-modify-write in one action). */
    action queue_add() {
        bytes_t q;
        queue_bytes.read(q, (bit<32>)smeta.egress_spec);
        queue_bytes.write((bit<32>)smeta.egress_spec, q + smeta.packet_length);
    }

    apply {
        bit<1> malformed = 0;
        if (smeta.parser_error != error.NoError) {
            /* enum hpccd_wire_err, in the order the parser checks */
            bit<32> code = 0;
            if (smeta.parser_error == error.HpccdIntTruncated) { code = 1; }
            else if (smeta.parser_error == error.HpccdMagic) { code = 2; }
            else if (smeta.parser_error == error.HpccdIntVersion) { code = 3; }
            else if (smeta.parser_error == error.HpccdRoom) { code = 4; }
            else if (smeta.parser_error == error.HpccdNhop) { code = 5; }
            else if (smeta.parser_error == error.HpccdHopsTruncated) { code = 6; }
            else if (smeta.parser_error == error.HpccdHdrTruncated) { code = 7; }
            else if (smeta.parser_error == error.HpccdVersion) { code = 8; }
            else if (smeta.parser_error == error.HpccdType) { code = 9; }
            else if (smeta.parser_error == error.HpccdLen) { code = 10; }
            if (code != 0) {
                wire_errors.count(code);        /* forwarded below, untouched */
            } else {
                malformed = 1;                  /* IPv4 header, or a frame cut short */
            }
        }
        if (malformed == 1) {
            drop_counted(DROP_PARSER);
        } else if (smeta.checksum_error == 1) {
            drop_counted(DROP_IPV4_CSUM);
        } else if (!hdr.ipv4.isValid()) {
            drop_counted(DROP_NOT_IPV4);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_counted(DROP_TTL);
        } else {
            meta.fwd = 0;
            switch (ipv4_lpm.apply().action_run) {
                ecmp_select: { ecmp_group.apply(); }
            }
            if (meta.fwd == 1) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                port_buffer.apply();
                queue_sample();
                wred_verdict_t verdict;
                wred.apply(hdr, meta.q_enq_bytes, smeta.egress_spec, meta.hpccd_udp, verdict);
                if (verdict == WRED_DROP) {
                    drop_counted(DROP_FAST_START);
                } else if ((bit<64>)meta.q_enq_bytes + (bit<64>)smeta.packet_length
                           > (bit<64>)meta.buffer_bytes) {
                    drop_counted(DROP_BUFFER);
                } else {
                    if (verdict == WRED_MARK) {
                        wred_marked.count((bit<32>)smeta.egress_spec);
                    }
                    queue_add();
                }
            }
        }
    }
}

/* ==== egress ============================================================= */

/* The INT stamp (docs/wire-format.md "INT header"), architecture-neutral:
 * with COLLECT set and nHop < room, write the record at index nHop,
 * increment nHop and XOR the switch id into pathID; with nHop == room set
 * OVERFLOW (the caller counts the packet) and write nothing.  Never writes
 * past room, never grows the packet.  The L4 checksum is patched
 * incrementally (RFC 1624) over the words that changed: a UDP checksum of 0
 * ("none") stays 0 and a computed 0 is sent as 0xffff (RFC 768); the TCP
 * checksum of a probe is always patched.  Same rules as hpccd__stamp_hop()
 * of include/hpccd/parse.h, which the lab switch runs.
 *
 * hops[nHop] with a run-time nHop is written through an if-chain over the
 * 8 constant indices: every target compiles that, where a run-time stack
 * index is not accepted everywhere. */
control IntStamp(inout headers_t hdr, in hop_sample_t s, out stamp_result_t result) {
    apply {
        result = STAMP_SKIP;
        if (hdr.int_hdr.isValid() && (hdr.int_hdr.flags & INT_F_COLLECT) != 0
                && s.switch_id != 0) {
            bit<32> sum_old = int_words(hdr.int_hdr);
            bit<32> sum_new = 0;
            bit<1> changed = 1;
            if (hdr.int_hdr.nhop == hdr.int_hdr.room) {
                result = STAMP_OVERFLOW;
                if ((hdr.int_hdr.flags & INT_F_OVERFLOW) != 0) {
                    changed = 0;
                } else {
                    hdr.int_hdr.flags = hdr.int_hdr.flags | INT_F_OVERFLOW;
                }
            } else {
                hpccd_hop_t rec;
                rec.setValid();
                rec.speed_code = s.speed_code;
                rec.ts = s.ts;
                rec.tx_units = s.tx_units;
                rec.qlen_units = s.qlen_units;
                bit<4> n = hdr.int_hdr.nhop;      /* < room <= 8 */
                if (n == 0)      { sum_old = sum_old + hop_words(hdr.hops[0]); hdr.hops[0] = rec; }
                else if (n == 1) { sum_old = sum_old + hop_words(hdr.hops[1]); hdr.hops[1] = rec; }
                else if (n == 2) { sum_old = sum_old + hop_words(hdr.hops[2]); hdr.hops[2] = rec; }
                else if (n == 3) { sum_old = sum_old + hop_words(hdr.hops[3]); hdr.hops[3] = rec; }
                else if (n == 4) { sum_old = sum_old + hop_words(hdr.hops[4]); hdr.hops[4] = rec; }
                else if (n == 5) { sum_old = sum_old + hop_words(hdr.hops[5]); hdr.hops[5] = rec; }
                else if (n == 6) { sum_old = sum_old + hop_words(hdr.hops[6]); hdr.hops[6] = rec; }
                else             { sum_old = sum_old + hop_words(hdr.hops[7]); hdr.hops[7] = rec; }
                sum_new = hop_words(rec);
                hdr.int_hdr.nhop = n + 1;
                hdr.int_hdr.path_id = hdr.int_hdr.path_id ^ s.switch_id;
                result = STAMP_WRITTEN;
            }
            sum_new = sum_new + int_words(hdr.int_hdr);
            if (changed == 1) {
                if (hdr.udp.isValid()) {
                    if (hdr.udp.checksum != 0) {
                        bit<16> c = csum_replace(hdr.udp.checksum, sum_old, sum_new);
                        hdr.udp.checksum = (c == 0) ? 16w0xffff : c;
                    }
                } else if (hdr.tcp.isValid()) {
                    hdr.tcp.checksum = csum_replace(hdr.tcp.checksum, sum_old, sum_new);
                }
            }
        }
    }
}

/* v1model egress: releases the packet's bytes from its queue, counts them
 * into the port's txBytes, and stamps the hop record of a valid hpccd
 * packet with the port's state when the packet is emitted ([HPCC]
 * section 4.1; egress runs after the queue):
 *   B       = port_config (speed code of the port's rate)
 *   TS      = egress_global_timestamp (us) x 1000, mod 2^24   (ns)
 *   txBytes = tx_bytes[port] after this packet >> 7, mod 2^20 (128 B)
 *   qLen    = queue_bytes[port] after this packet / 80,
 *             i.e. the bytes it leaves behind, saturated at 0x7fff (80 B)
 * docs/switch.md "v1model metadata and the hop record" gives the reasons. */
control SwitchEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t smeta) {
    IntStamp() int_stamp;

    /* Hop records written, per egress port. */
    @name(".int_stamped") counter(HPCCD_PORTS, CounterType.packets) int_stamped;
    /* Packets that found the room full (nHop == room), per egress port. */
    @name(".int_overflow") counter(HPCCD_PORTS, CounterType.packets) int_overflow;

    @name(".set_switch_id") action set_switch_id(switch_id_t id) {
        meta.switch_id = id;
    }

    /* The switch's 12-bit id; 0 (not configured) disables stamping. */
    @name(".switch_config") table switch_config {
        actions = { set_switch_id; }
        size = 1;
        default_action = set_switch_id(0);
    }

    @name(".set_port_speed") action set_port_speed(speed_code_t speed_code) {
        meta.speed_code = speed_code;
    }

    /* B of each egress port: the speed code of its rate (docs/wire-format.md
     * table); 0 (unknown) for a port not configured. */
    @name(".port_config") table port_config {
        key = { smeta.egress_port: exact; }
        actions = { set_port_speed; }
        size = HPCCD_PORTS;
        default_action = set_port_speed(0);
    }

    /* v1model: the packet has left its queue and is transmitted (one
     * action: each register's read-modify-write under its lock).  What the
     * registers hold after it is the port's state at the packet's departure:
     * the bytes still queued behind it and the bytes sent with it. */
    action queue_release() {
        bytes_t q;
        bytes_t t;
        queue_bytes.read(q, (bit<32>)smeta.egress_port);
        meta.q_deq_bytes = (q > smeta.packet_length) ? q - smeta.packet_length : 0;
        queue_bytes.write((bit<32>)smeta.egress_port, meta.q_deq_bytes);
        tx_bytes.read(t, (bit<32>)smeta.egress_port);
        meta.tx_deq_bytes = t + smeta.packet_length;
        tx_bytes.write((bit<32>)smeta.egress_port, meta.tx_deq_bytes);
    }

    apply {
        queue_release();
        if (meta.hpccd_ok == 1) {
            switch_config.apply();
            port_config.apply();
            hop_sample_t s;
            s.switch_id = meta.switch_id;
            s.speed_code = meta.speed_code;
            s.ts = (hop_ts_t)(smeta.egress_global_timestamp * 1000);
            s.tx_units = (hop_tx_t)(meta.tx_deq_bytes >> 7);
            if ((bit<64>)meta.q_deq_bytes >= QLEN_SAT_BYTES) {
                s.qlen_units = QLEN_MAX;
            } else {
                s.qlen_units = (hop_qlen_t)(((bit<64>)meta.q_deq_bytes * QLEN_DIV80_MUL)
                                            >> QLEN_DIV80_SHIFT);
            }
            stamp_result_t res;
            int_stamp.apply(hdr, s, res);
            if (res == STAMP_WRITTEN) {
                int_stamped.count((bit<32>)smeta.egress_port);
            } else if (res == STAMP_OVERFLOW) {
                int_overflow.count((bit<32>)smeta.egress_port);
            }
        }
    }
}

/* ==== deparser =========================================================== */

control SwitchDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.tcp_options);
        pkt.emit(hdr.int_hdr);
        pkt.emit(hdr.hops);
        pkt.emit(hdr.hpccd);
    }
}

/* ==== package ============================================================ */

V1Switch(SwitchParser(),
         SwitchVerifyChecksum(),
         SwitchIngress(),
         SwitchEgress(),
         SwitchComputeChecksum(),
         SwitchDeparser()) main;
