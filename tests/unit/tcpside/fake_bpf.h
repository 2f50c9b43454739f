/* SPDX-License-Identifier: BSD-2-Clause */
/* What tests/unit/tcpside/fake_bpf.c adds to the libbpf calls it fakes. */
#ifndef HPCCD_TEST_FAKE_BPF_H
#define HPCCD_TEST_FAKE_BPF_H

/* the fd of tcp_hpcc's hpccd_tcp_cst in the engine's configuration: every
 * flow is found run by "hpcc", with data in flight */
#define FAKE_BPF_CST_FD 1000

/* A ring record (struct hpccd_tcp_resp or hpccd_tcp_wake) for the engine's
 * next ring_buffer__consume(); 0, or -ENOSPC. */
int fake_bpf_push(const void *rec, size_t size);

#endif
