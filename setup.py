"""What pyproject.toml cannot say: the compiled parts of the package.

- The cffi modules ``hpccd._cc``, ``hpccd._bpf``, ``hpccd._transport`` and ``hpccd._tcpside``,
  through cffi's setuptools integration (``cffi_modules``) with the same
  builders that ``make`` runs (cffi_build/build_*.py: their sources, headers
  and flags are defined there and nowhere else).
- The BPF objects: ``make bpf`` (clang, bpftool) and a copy of each
  build/ebpf/*.bpf.o into the package as hpccd/bpf/, where hpccd.bpf.loader and the
  daemon find them in an installed package.

``pip install .`` and ``pip wheel .`` run both; docs/install.md.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "cffi_build"))        # the builders import cffi_common
CFFI_MODULES = [f"cffi_build/build_{m}.py:ffibuilder" for m in ("cc", "bpf", "transport",
                                                                   "tcpside")]


class BuildPyWithBpf(build_py):
    """build_py, then the BPF objects into the built package (hpccd/bpf/)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:                       # the source tree's build/ebpf serves
            return
        subprocess.run(["make", "-C", str(ROOT), "-s", "bpf"], check=True)
        dest = pathlib.Path(self.build_lib) / "hpccd" / "bpf"
        dest.mkdir(parents=True, exist_ok=True)
        objs = sorted((ROOT / "build" / "ebpf").glob("*.bpf.o"))
        if not objs:
            raise SystemExit("make bpf built no object in build/ebpf")
        for o in objs:
            shutil.copy2(o, dest / o.name)


class BuildExtNotEditable(build_ext):
    """In an editable install (scripts/run.sh's .venv) `make` builds the
    modules in the source tree; a second copy here would only go stale."""

    def run(self) -> None:
        if not self.editable_mode:
            super().run()


setup(cffi_modules=CFFI_MODULES,
      cmdclass={"build_py": BuildPyWithBpf, "build_ext": BuildExtNotEditable})
