"""hpccd: INT-based precise congestion control (HPCC, HPCC++) for Linux hosts."""

__version__ = "0.1.0"
