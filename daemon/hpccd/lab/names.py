"""The lab's names: its error, where its state and namespaces live, and how
namespaces and interfaces are named (docs/lab.md)."""
from __future__ import annotations

import os

STATE_DIR = "/run/hpccd"
NETNS_DIR = "/run/netns"
HOST_IFNAME = "eth0"
TEMP_PREFIX = "hl"


class LabError(RuntimeError):
    """Building, tearing down or inspecting a lab failed."""


def netns_name(lab: str, node: str) -> str:
    return f"{lab}-{node}"


def port_ifname(number: int) -> str:
    return f"p{number}"


def state_path(lab: str, state_dir: str = STATE_DIR) -> str:
    return os.path.join(state_dir, f"lab-{lab}.json")
