"""The native AF_XDP transport: the engine's Python face, the daemon's transport
component and `hpccctl send` / `recv`."""
