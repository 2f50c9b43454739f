"""The TCP-side deployment: struct_ops congestion controls driven by the probe engine."""
