# tensorforge: two commands on a fresh machine.
#   make demo   sets everything up, then runs the main job on embedded defaults
#   make test   sets everything up, then runs the whole test suite
# `make setup` is idempotent: a second run checks two stamps and returns in seconds.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tensorforge-installed
# The Debian packages of the ASIC flow: OpenSTA and the OSU 0.18um standard-cell liberty.
APT_PACKAGES := opensta qflow-tech-osu018
OSU018_LIB   := /usr/share/qflow/tech/osu018/osu018_stdcells.lib
PYTEST_ARGS  ?= -m "not slow"

.PHONY: setup demo test lint system-packages clean-cache

setup: $(STAMP) system-packages

# torch first, pinned to the CPU build on disk, so nothing pulls gigabytes of CUDA wheels;
# then the project with its dev extras. Re-run only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

system-packages:
	@if command -v sta >/dev/null 2>&1 && test -f $(OSU018_LIB); then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian packages: $(APT_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	else \
		echo "The ASIC flow needs OpenSTA and the OSU 0.18um liberty. Run:"; \
		echo "    sudo apt-get update && sudo apt-get install -y $(APT_PACKAGES)"; \
	fi

demo: setup
	$(BIN)/tensorforge demo

test: setup
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

clean-cache:
	rm -rf "$${TENSORFORGE_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/tensorforge}"
