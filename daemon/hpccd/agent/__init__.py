"""The daemon `hpccd`: its main loop, components, configuration, control socket,
flow table, Prometheus metrics, systemd notification and ownership of kernel objects."""
