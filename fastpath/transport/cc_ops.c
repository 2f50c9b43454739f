// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's algorithms by enum hpccd_algo: adding one is a core file
 * (fastpath/cc/), one cc_<name>.c here and one row below.
 */
#include "tp.h"

const struct tp_cc_ops *tp_cc_ops_of(uint32_t algo)
{
	switch (algo) {
	case HPCCD_ALGO_HPCC:
		return &tp_cc_hpcc;
	case HPCCD_ALGO_RXHPCC:
		return &tp_cc_rxhpcc;
	case HPCCD_ALGO_DCTCP:
		return &tp_cc_dctcp;
	case HPCCD_ALGO_LDCP:
		return &tp_cc_ldcp;
	case HPCCD_ALGO_DCQCN:
		return &tp_cc_dcqcn;
	case HPCCD_ALGO_TIMELY:
		return &tp_cc_timely;
	}
	return NULL;
}
