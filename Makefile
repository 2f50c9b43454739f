# hpccd build: cffi modules of the C fast path (and, later, BPF objects).
# `make` builds everything; `make test` runs the suite; `make bench` the
# C benchmarks.  scripts/run.sh wraps these with the one-time set-up.
.DELETE_ON_ERROR:
.PHONY: all cffi test bench clean

PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

CC_SRCS := $(wildcard cffi_build/cc/*.c)
CC_HDRS := $(wildcard include/hpccd/*.h)
CC_MODULE := daemon/hpccd/_cc$(EXT_SUFFIX)

all: cffi

cffi: $(CC_MODULE)

$(CC_MODULE): cffi_build/build_cc.py $(CC_SRCS) $(CC_HDRS)
	$(PYTHON) cffi_build/build_cc.py

test: all
	$(PYTHON) -m pytest

bench: all
	bash scripts/bench_cc.sh

clean:
	rm -rf build daemon/hpccd/_cc*.so
