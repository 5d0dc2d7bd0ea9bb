# Two entry points: `make train` and `make test`. Both create or update the project-local
# virtual environment `.venv` first. The CPU build of torch is installed explicitly so that
# pip does not pull the multi-GB CUDA build on machines without a GPU.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: venv train test bench lint format clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "$(TORCH_SPEC)"
	$(PIP) install --quiet -e ".[dev,bench,vla,rewards,warp]"
	touch $(STAMP)

train: venv
	$(VENV)/bin/vla-rl train $(ARGS)

test: venv
	$(VENV)/bin/pytest -q $(ARGS)

bench: venv
	$(PY) -m benchmarks.run_all $(ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) runs outputs build *.egg-info
