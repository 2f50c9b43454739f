"""The congestion-control core's Python face and what needs no privileges: the wire
format, SipHash, the checksum, replay, trace generation, decoding."""
