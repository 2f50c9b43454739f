"""The BPF side: the libbpf loader and the counters of the programs' maps (the
compiled programs are installed beside them, as package data)."""
