"""scripts/perf_lab_split.py: a perf profile of an experiment split by component."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))

import perf_lab_split as pls  # noqa: E402

K = "[kernel.kallsyms]"
OURS = {4242}


def ours(comm: str, pid: int) -> bool:
    return pid in OURS


def test_bpf_program_on_the_chain_wins_over_softirq():
    frames = [("htab_map_lookup_elem", K), ("bpf_prog_257b117e5e3dadaa_hpccd_int_deq", K),
              ("bpf_trace_run4", K), ("htb_dequeue", K), ("net_tx_action", K),
              ("handle_softirqs", K)]
    assert pls.component("hpccd-tp", 4242, frames, ours) == "bpf hpccd_int_deq"


def test_softirq_part_is_the_first_named_frame_from_the_leaf():
    frames = [("htb_dequeue", K), ("__qdisc_run", K), ("__dev_queue_xmit", K),
              ("ip_finish_output2", K), ("ip_forward", K), ("__netif_receive_skb_core", K),
              ("process_backlog", K), ("net_rx_action", K), ("handle_softirqs", K)]
    assert pls.component("ksoftirqd/1", 17, frames, ours) == "softirq: qdisc (HTB + bfifo)"
    frames = [("fib_table_lookup", K)] + frames[4:]
    assert pls.component("hpccd-tp", 4242, frames, ours) == "softirq: IP forwarding"


def test_engine_and_python_threads_user_and_kernel():
    assert pls.component("hpccd-tp", 4242, [("tp__loop_once", "/x/_transport.so")],
                         ours) == "engines (hpccd-tp): user"
    frames = [("finish_task_switch.isra.0", K), ("schedule", K), ("do_sys_poll", K)]
    assert pls.component("hpccd-tp", 4242, frames, ours) == \
        "engines (hpccd-tp): kernel, poll / sleep / switch"
    frames = [("clear_page_erms", K), ("exc_page_fault", K)]
    assert pls.component("hpccctl", 4242, frames, ours) == \
        "experiment (Python): kernel, page faults / zeroing"


def test_other_tasks_keep_their_softirq_and_programs():
    frames = [("bpf_prog_1_hpccd_int_sw", K), ("handle_softirqs", K)]
    assert pls.component("iperf3", 99, frames, ours) == "other processes"


@pytest.mark.skipif(shutil.which("perf") is None or os.geteuid() != 0,
                    reason="needs perf (linux-perf) and root")
def test_a_real_recording_of_a_busy_process(tmp_path):
    """perf records a Python process that spins 0.6 s in user space; the split
    gives its samples to the experiment's Python, user."""
    data, pidf = tmp_path / "p.data", tmp_path / "pid"
    code = ("import os, time\n"
            f"open({str(pidf)!r}, 'w').write(str(os.getpid()))\n"
            "t = time.monotonic()\n"
            "while time.monotonic() - t < 0.6:\n"
            "    sum(range(1000))\n")
    subprocess.run(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-F", "999",
                    "-o", str(data), "--", sys.executable, "-c", code],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run([sys.executable, str(pathlib.Path(pls.__file__)), str(data),
                          "--pid", pidf.read_text()], check=True, capture_output=True,
                         text=True).stdout
    rows = {line[:58].strip(): float(line[58:].split()[0]) for line in out.splitlines()[1:]}
    assert rows["experiment (Python): user"] >= 0.3
    assert rows["all samples"] >= rows["experiment (Python): user"]
