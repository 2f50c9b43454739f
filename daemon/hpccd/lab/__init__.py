"""The lab: topologies built as network namespaces, the software INT switch, its
metrics, and the P4 switch's control-plane generator."""
