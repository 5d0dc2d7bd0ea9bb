# Two entry points: `make train` and `make test`. Both create or update the project-local
# virtual environment `.venv` first. The CPU build of torch is installed explicitly so that
# pip does not pull the multi-GB CUDA build on machines without a GPU.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
MW_VENV := .venv-metaworld
MW_STAMP := $(MW_VENV)/.installed
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: venv train test docs bench bench-gpu lint format clean ros

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "$(TORCH_SPEC)"
	$(PIP) install --quiet -e ".[dev,bench,vla,rewards,warp,ray,deploy,docs]"
	touch $(STAMP)

train: venv
	$(VENV)/bin/vla-rl train $(ARGS)

# The main suite, then the backends that need their own environment (see the README's backend table).
test: venv ros
	$(VENV)/bin/pytest -q $(ARGS)
	$(MAKE) --no-print-directory test-metaworld
	$(MAKE) --no-print-directory docs

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on broken links and references.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

bench: venv $(MW_STAMP)
	$(PY) -m benchmarks.run_all $(ARGS)

# On a machine with an NVIDIA GPU and a CUDA build of torch (set TORCH_SPEC to one): the tests that
# skip without CUDA, then MuJoCo Warp on the GPU against CPU MuJoCo on every core, and the rollout
# over raw warp physics (README, "On a GPU").
bench-gpu: venv
	$(VENV)/bin/pytest -q tests/sims/test_mujoco_warp.py -k cuda
	$(PY) -m benchmarks.backend_speed --task push --num-envs 256 1024 4096 --threads $$(nproc) \
		--warp-device cuda --no-camera --results benchmarks/results/backend_speed_cuda.json
	$(PY) -m benchmarks.rollout_ratio --backend mujoco_warp --device cuda --tasks reach --num-envs 4096 \
		--repeats 3 --collections 2

# ROS 1 from the system's packages (rospy is not on PyPI): roscore and the messages the deployment
# tests use. Needs root (or sudo); skipped when roscore is already there.
ROS_PACKAGES := ros-core python3-rospy python3-sensor-msgs python3-std-msgs python3-geometry-msgs python3-trajectory-msgs
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ros:
	@command -v roscore >/dev/null || $(SUDO) apt-get install -y -qq $(ROS_PACKAGES) >/dev/null \
		|| ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(ROS_PACKAGES) >/dev/null)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(MW_VENV) runs outputs build site *.egg-info

# MetaWorld 3.1 pins mujoco==3.3.0 while the main venv carries MuJoCo 4 (for MuJoCo Warp), so the
# metaworld backend gets its own venv; `make test-metaworld` runs its tests there.
$(MW_VENV): $(MW_STAMP)

$(MW_STAMP): pyproject.toml Makefile
	test -x $(MW_VENV)/bin/python || $(PYTHON) -m venv $(MW_VENV)
	$(MW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MW_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(MW_VENV)/bin/python -m pip install --quiet -e ".[dev,vla,metaworld]"
	touch $(MW_STAMP)

.PHONY: test-metaworld
test-metaworld: $(MW_STAMP)
	$(MW_VENV)/bin/pytest -q tests/conformance tests/sims/test_metaworld_*.py -k metaworld $(MW_ARGS)
