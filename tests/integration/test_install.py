"""Packaging and installation: a wheel with the compiled parts, and
scripts/install.sh placing and removing hpccd (docs/install.md).

Invariants protected:

- ``pip wheel .`` builds the three cffi modules (hpccd._cc, hpccd._bpf,
  hpccd._transport) and ships every BPF object that ``make bpf`` builds
  (hpccd/bpf/*.bpf.o);
- ``scripts/install.sh install`` into a scratch PREFIX/SYSCONFDIR/UNITDIR:
  ``hpccd`` and ``hpccctl`` run from the virtualenv with the installed
  package (not this source tree), the installed daemon finds the package's
  BPF objects, ``hpccd --check`` accepts the example configuration (its
  bpf_dir pointed at the install), the unit names the installed paths and
  ``systemd-analyze verify`` accepts it, and the docs are in place;
- a second install is refused, and so is one that would replace a file that
  is not the installer's (which is left as it was);
- ``uninstall`` leaves exactly the tree there was before (nothing behind),
  and keeps a file of the user's in a folder it created.

Needs the build tools of scripts/run.sh setup and pip's access to the package
index (the virtualenv's dependencies); about a minute.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import zipfile

import pytest

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"

if not os.path.exists(PYTHON) or shutil.which("clang") is None:
    pytest.skip("needs Debian's python3 and clang (scripts/run.sh setup and install)",
                allow_module_level=True)


def tree(d: pathlib.Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def test_wheel_has_the_compiled_modules_and_bpf_objects(tmp_path):
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "wheel", "-q",
                        "--no-deps", "-w", str(tmp_path), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (whl,) = tmp_path.glob("hpccd-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for mod in ("_cc", "_bpf", "_transport"):
        assert any(n.startswith(f"hpccd/{mod}.") and n.endswith(".so") for n in names), mod
    built = sorted(p.name for p in (ROOT / "build" / "ebpf").glob("*.bpf.o"))
    assert built and sorted(n.split("/")[-1] for n in names
                            if n.startswith("hpccd/bpf/") and n.endswith(".bpf.o")) == built


@pytest.fixture
def scratch(tmp_path):
    env = dict(os.environ, PREFIX=str(tmp_path / "usr"), SYSCONFDIR=str(tmp_path / "etc"),
               UNITDIR=str(tmp_path / "etc" / "systemd" / "system"), INSTALL_PYTHON=PYTHON)
    env.pop("HPCCD_BPF_DIR", None)
    (tmp_path / "etc").mkdir()
    yield tmp_path, env
    if (tmp_path / "usr" / "lib" / "hpccd" / "installed").exists():       # a failed test
        subprocess.run(["bash", str(ROOT / "scripts" / "install.sh"), "uninstall"], env=env,
                       capture_output=True, timeout=120)


def install(env, action: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "install.sh"), action], env=env,
                          capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


def test_install_then_uninstall_leaves_nothing(scratch):
    d, env = scratch
    before = tree(d)
    r = install(env, "install")
    assert r.returncode == 0, r.stderr
    usr, etc = d / "usr", d / "etc"
    venv = usr / "lib" / "hpccd" / "venv"
    # the programs, from the installed package
    for prog in ("hpccd", "hpccctl"):
        v = subprocess.run([str(usr / "bin" / prog), "--version"], capture_output=True,
                           text=True, timeout=60, cwd=d)
        assert v.returncode == 0 and v.stdout.startswith(f"{prog} "), v.stderr
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import hpccd, hpccd._cc, hpccd._bpf, hpccd._transport, hpccd.bpf.loader as b\n"
         "print(hpccd.__file__); print(hpccd._transport.__file__); print(b.OBJ_DIR)"],
        capture_output=True, text=True, timeout=60, cwd=d)
    assert probe.returncode == 0, probe.stderr
    pkg, transport, obj_dir = probe.stdout.split()
    assert pkg.startswith(str(venv)) and transport.startswith(str(venv))
    assert pathlib.Path(obj_dir) == pathlib.Path(pkg).parent / "bpf"
    assert (pathlib.Path(obj_dir) / "xdp_host.bpf.o").is_file()
    assert (usr / "lib" / "hpccd" / "bpf").resolve() == pathlib.Path(obj_dir).resolve()
    # the example configuration, checked by the installed daemon
    example = etc / "hpccd" / "hpccd.toml.example"
    text = example.read_text()
    assert f'bpf_dir = "{usr}/lib/hpccd/bpf"' in text
    key = d / "tag.key"
    key.write_text(os.urandom(16).hex() + "\n")
    key.chmod(0o600)
    cfg = d / "hpccd.toml"
    cfg.write_text(text.replace("/etc/hpccd/tag.key", str(key)))
    chk = subprocess.run([str(usr / "bin" / "hpccd"), "--check", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=60)
    assert chk.returncode == 0 and chk.stdout.strip() == f"{cfg}: ok", chk.stderr
    # the unit, pointed at the installed paths
    unit = etc / "systemd" / "system" / "hpccd.service"
    u = unit.read_text()
    assert f"ExecStart={usr}/bin/hpccd --config {etc}/hpccd/hpccd.toml" in u
    assert f"file:{usr}/share/doc/hpccd/configuration.md" in u
    assert "/usr/bin/hpccd" not in u.replace(str(usr), "")
    if shutil.which("systemd-analyze"):
        v = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                           capture_output=True, text=True, timeout=60)
        assert v.returncode == 0 and v.stdout + v.stderr == "", v.stdout + v.stderr
    for man in ("man8/hpccd.8", "man1/hpccctl.1"):
        text = (usr / "share" / "man" / man).read_text()
        assert text.startswith(".TH ") and ".SH COMMANDS" in text or man.startswith("man8")
    comp = usr / "share" / "bash-completion" / "completions"
    assert "complete -o filenames -F _hpccd_complete hpccd hpccctl" in \
        (comp / "hpccctl").read_text()
    assert (comp / "hpccd").resolve() == (comp / "hpccctl").resolve()
    docs = usr / "share" / "doc" / "hpccd"
    assert {"README.md", "configuration.md", "metrics.md", "install.md"} <= \
        {p.name for p in docs.iterdir()}
    # installed already: refused, nothing changed
    again = install(env, "install")
    assert again.returncode == 1 and "installed under" in again.stderr
    # a file of the user's in a folder the installer made stays, and so does the folder
    mine = etc / "hpccd" / "hpccd.toml"
    mine.write_text("# mine\n")
    r = install(env, "uninstall")
    assert r.returncode == 0, r.stderr
    assert mine.read_text() == "# mine\n"
    assert tree(d) == before | {"hpccd.toml", "tag.key", "etc/hpccd", "etc/hpccd/hpccd.toml"}
    mine.unlink()


def test_install_refuses_to_replace_a_file_not_its_own(scratch):
    d, env = scratch
    unit = d / "etc" / "systemd" / "system" / "hpccd.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("# somebody else's\n")
    before = tree(d)
    r = install(env, "install")
    assert r.returncode == 1
    assert f"{unit} exists and is not from this installer: not replacing it" in r.stderr
    assert unit.read_text() == "# somebody else's\n"
    assert tree(d) == before


def test_debian_package_ships_programs_unit_objects_and_docs():
    """scripts/build_deb.sh (debhelper, pybuild, dpkg-buildpackage) on a copy of
    the checkout: the package holds the programs, the compiled modules, every
    BPF object and the link the example configuration names, the unit (not
    started at installation), the example and the docs uncompressed (the unit
    names them), and depends on Debian's Python packages.  Running it under
    systemd: scripts/check_unit_nspawn.sh with HPCCD_DEB."""
    for tool in ("dpkg-buildpackage", "dh", "dh_python3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/run.sh setup installs it)")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "build_deb.sh")], capture_output=True,
                       text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    debs = [p for p in (ROOT / "build" / "deb").glob("hpccd_*.deb")]
    assert len(debs) == 1
    deb = debs[0]
    assert str(deb.relative_to(ROOT)) in r.stdout.split()
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    paths = {ln.split()[5].lstrip(".") for ln in listing.splitlines()}
    links = {ln.split()[5].lstrip("."): ln.split()[7] for ln in listing.splitlines()
             if ln.startswith("l")}
    pkg = "/usr/lib/python3/dist-packages/hpccd"
    assert {"/usr/bin/hpccd", "/usr/bin/hpccctl", "/lib/systemd/system/hpccd.service",
            "/usr/share/doc/hpccd/examples/hpccd.toml", "/usr/share/doc/hpccd/README.md",
            "/usr/share/doc/hpccd/configuration.md", "/usr/share/doc/hpccd/metrics.md",
            "/usr/share/man/man8/hpccd.8.gz", "/usr/share/man/man1/hpccctl.1.gz",
            "/usr/share/bash-completion/completions/hpccctl",
            f"{pkg}/__init__.py", f"{pkg}/agent/main.py"} <= paths
    for mod in ("_cc", "_bpf", "_transport"):
        assert any(p.startswith(f"{pkg}/{mod}.") and p.endswith(".so") for p in paths), mod
    built = {p.name for p in (ROOT / "build" / "ebpf").glob("*.bpf.o")}
    assert built and {p.rsplit("/", 1)[1] for p in paths if p.startswith(f"{pkg}/bpf/")
                      and p.endswith(".o")} == built
    assert links["/usr/lib/hpccd/bpf"] == "../python3/dist-packages/hpccd/bpf"
    assert links["/usr/share/bash-completion/completions/hpccd"] == "hpccctl"
    info = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                          text=True, check=True).stdout
    for dep in ("python3-pyroute2", "python3-prometheus-client", "python3-cffi-backend",
                "libbpf1", "libisal2", "procps"):
        assert dep in info, info
    # The engine sets up its AF_XDP socket with the kernel's own calls (for TX
    # metadata, fastpath/transport/xsk.c) and uses only libxdp's inline ring
    # helpers: libxdp is a build dependency (its headers), not a run-time one.
    assert "libxdp" not in info, info
    # not enabled or started by the maintainer scripts: no configuration yet
    scripts = subprocess.run(["dpkg-deb", "-I", str(deb), "postinst"], capture_output=True,
                             text=True).stdout
    assert "deb-systemd-helper" in scripts                 # dh_installsystemd did run
    assert "deb-systemd-invoke" not in scripts             # nothing started
    # enabled only again on upgrade if the admin had enabled it
    assert "deb-systemd-helper enable" not in scripts.split("was-enabled", 1)[0]
