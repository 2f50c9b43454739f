#!/usr/bin/env python3
"""Write the BMv2 runtime configuration of hpccd.p4 from lab topology files.

    python3 switch_p4/gen_runtime.py                  # every bundled topology -> switch_p4/runtime/
    python3 switch_p4/gen_runtime.py tree             # one, by name or TOML path
    python3 switch_p4/gen_runtime.py --check          # exit 1 if a committed file is stale
    python3 switch_p4/gen_runtime.py incast --hosts   # the host-side ip commands

A thin command line beside the program it configures.  The generator itself
is hpccd.lab.p4runtime_gen (daemon/hpccd/lab/p4runtime_gen.py): it lives in the
package so that it reads topologies with the same code as the lab builder,
and tests and hpccctl import it like any other module.
"""
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
try:
    from hpccd.lab import p4runtime_gen
except ImportError:                 # a checkout without the package installed
    sys.path.insert(0, str(HERE.parent / "daemon"))
    from hpccd.lab import p4runtime_gen

if __name__ == "__main__":
    sys.exit(p4runtime_gen.main(default_out=HERE / "runtime"))
