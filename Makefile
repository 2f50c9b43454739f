# hpccd build: cffi modules of the C fast path and the BPF objects.
# `make` builds everything; `make test` runs the suite; `make bench` the
# C benchmarks; `make bpf` only the BPF objects.  scripts/run.sh wraps these
# with the one-time set-up.
#
# .DELETE_ON_ERROR: a recipe that fails half-way (bpftool dying while the
# shell redirect already created vmlinux.h, clang leaving a partial .o)
# must not leave a target that looks up to date to the next `make`.
.DELETE_ON_ERROR:
.PHONY: all cffi bpf test bench clean

PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

# The core's sources and its determinism flags (their one home).
CC_SRCS := $(wildcard fastpath/cc/*.c) fastpath/cc/numeric.cflags
CC_HDRS := $(wildcard include/hpccd/*.h)
CC_MODULE := daemon/hpccd/_cc$(EXT_SUFFIX)
# The libbpf bindings (loader): cffi_build/bpf_shim.[ch] linked with -lbpf.
LOADER_SRCS := cffi_build/bpf_shim.c cffi_build/bpf_shim.h
# ... and the kernel/user ABI of the programs it loads, which it exports to Python.
LOADER_HDRS := include/hpccd/kern_user.h $(CC_HDRS)
LOADER_MODULE := daemon/hpccd/_bpf$(EXT_SUFFIX)
# The native transport (fastpath/transport/*.c, one concern a file) with the
# parser and the congestion-control core it drives, linked with -lxdp -lbpf
# -lisal.
TRANSPORT_SRCS := $(wildcard fastpath/transport/*.c fastpath/transport/*.h) $(CC_SRCS)
TRANSPORT_MODULE := daemon/hpccd/_transport$(EXT_SUFFIX)
# The TCP-side probe engine (fastpath/tcpside/*.c) with the core, -lbpf.
TCPSIDE_SRCS := $(wildcard fastpath/tcpside/*.c) $(CC_SRCS) include/hpccd/kern_user.h include/hpccd/tcp_cc.h
TCPSIDE_MODULE := daemon/hpccd/_tcpside$(EXT_SUFFIX)

all: cffi bpf

cffi: $(CC_MODULE) $(LOADER_MODULE) $(TRANSPORT_MODULE) $(TCPSIDE_MODULE)

$(CC_MODULE): cffi_build/build_cc.py cffi_build/cffi_common.py $(CC_SRCS) $(CC_HDRS)
	$(PYTHON) cffi_build/build_cc.py

$(LOADER_MODULE): cffi_build/build_bpf.py cffi_build/cffi_common.py $(LOADER_SRCS) $(LOADER_HDRS)
	$(PYTHON) cffi_build/build_bpf.py

$(TCPSIDE_MODULE): cffi_build/build_tcpside.py cffi_build/cffi_common.py $(TCPSIDE_SRCS) $(CC_HDRS)
	$(PYTHON) cffi_build/build_tcpside.py

$(TRANSPORT_MODULE): cffi_build/build_transport.py cffi_build/cffi_common.py $(TRANSPORT_SRCS) $(CC_HDRS)
	$(PYTHON) cffi_build/build_transport.py

# ---- BPF objects (ebpf/x.bpf.c -> build/ebpf/x.bpf.o) ---------------------
#
# Compiled ahead of time with clang against a vmlinux.h made from the running
# kernel's BTF (CO-RE): no kernel headers are installed on the lab hosts, and
# libbpf relocates field offsets at load time.

BPFTOOL ?= bpftool
BPF_CLANG ?= clang
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
BPF_OUT := build/ebpf
BPF_SRCS := $(wildcard ebpf/*.bpf.c)
BPF_OBJS := $(patsubst ebpf/%.bpf.c,$(BPF_OUT)/%.bpf.o,$(BPF_SRCS))
# Every object depends on every header it may include (ours and the shared
# wire headers): they are few, and a stale object that disagrees with the
# daemon about a struct layout is far worse than a needless rebuild.
BPF_HDRS := $(wildcard ebpf/*.h include/hpccd/*.h)
# -g: BTF for the maps and CO-RE relocations (libbpf needs it, not just
# debuggers); -O2: the verifier cannot follow unoptimised clang output;
# -D__TARGET_ARCH_x86: what bpf_tracing.h wants to know; -Werror: a warning
# in code that runs in the kernel is a bug until shown otherwise.
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_x86 -Wall -Werror \
	-I$(BPF_OUT) -Iinclude -Iebpf

bpf: $(BPF_OBJS)

# vmlinux.h from the kernel's own BTF.  sysfs stamps the BTF file with the
# boot time, so the header is regenerated after every boot (cheap) and in
# particular after booting another kernel.
$(BPF_OUT)/vmlinux.h: $(VMLINUX_BTF)
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file $< format c > $@

# One object per program source.  No mkdir: build/ebpf exists once the
# vmlinux.h prerequisite has been made.
$(BPF_OUT)/%.bpf.o: ebpf/%.bpf.c $(BPF_OUT)/vmlinux.h $(BPF_HDRS)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

test: all
	$(PYTHON) -m pytest

bench: all
	bash scripts/bench_cc.sh

clean:
	rm -rf build daemon/hpccd/_cc*.so daemon/hpccd/_bpf*.so daemon/hpccd/_transport*.so daemon/hpccd/_tcpside*.so
