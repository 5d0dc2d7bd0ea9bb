# Two entry points: `make train` and `make test`. Both create or update the project-local
# virtual environment `.venv` first. Every venv installs the versions its lock file in constraints/
# pins (pip-compile's output; `make lock` regenerates them), so a new upstream release cannot
# change a fresh install. The locks pin the CPU build of torch so that pip does not pull the
# multi-GB CUDA build on machines without a GPU.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
MW_VENV := .venv-metaworld
MW_STAMP := $(MW_VENV)/.installed
LOCK := constraints/main.txt
MW_LOCK := constraints/metaworld.txt
LR_VENV := .venv-lerobot
LR_STAMP := $(LR_VENV)/.installed
LR_LOCK := constraints/lerobot.txt
LB_VENV := .venv-libero
LB_STAMP := $(LB_VENV)/.installed
LB_LOCK := constraints/libero.txt
EXTRAS := dev,bench,vla,rewards,warp,ray,deploy,takeover,docs
MW_EXTRAS := dev,vla,metaworld
LB_EXTRAS := dev,vla,libero
# The torch build, by default the lock's. Another build of the same version, e.g. CUDA on a GPU machine:
# `make venv TORCH_SPEC=torch==2.13.0+cu130 TORCH_INDEX=https://download.pytorch.org/whl/cu130`.
# TORCH_INDEX is an extra index for torch alone (empty: the configured ones and find-links).
TORCH_SPEC ?= $(shell sed -n 's/^\(torch==[^ ]*\).*/\1/p' $(LOCK))
TORCH_INDEX ?=
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

# $(call install_locked,VENV,LOCK,EXTRAS): create VENV, then install pip and the build backend, torch
# and the project with EXTRAS, every pip call constrained by LOCK (its torch line set to TORCH_SPEC).
define install_locked
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	sed 's/^torch==.*/$(TORCH_SPEC)/' $(2) > $(1)/constraints.txt
	$(1)/bin/python -m pip install --quiet -c $(1)/constraints.txt pip setuptools wheel
	$(1)/bin/python -m pip install --quiet -c $(1)/constraints.txt $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(1)/bin/python -m pip install --quiet -c $(1)/constraints.txt --no-build-isolation -e ".[$(3)]"
	touch $(1)/.installed
endef

.PHONY: venv train test docs bench bench-gpu bench-gpu-libero gpu-kit gpu-kit-libero lint format clean ros lock

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile $(LOCK)
	$(call install_locked,$(VENV),$(LOCK),$(EXTRAS))

# Regenerate the locks (main and metaworld from pyproject.toml and constraints/base.in, libero from
# pyproject.toml and constraints/libero.in, lerobot from constraints/lerobot.in), keeping the pinned versions that still fit; `make lock LOCK_ARGS=--upgrade`
# moves every pin to the newest release that resolves. It uses the venv's pip-compile (pip-tools, in the
# dev extra) and does not reinstall the venv first.
LOCK_ARGS ?=
PIP_COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) pyproject.toml constraints/base.in
lock: | $(STAMP)
	$(PIP_COMPILE) --extra $(EXTRAS) -o $(LOCK)
	$(PIP_COMPILE) --extra $(MW_EXTRAS) -o $(MW_LOCK)
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras \
		--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) pyproject.toml constraints/libero.in \
		--extra $(LB_EXTRAS) -o $(LB_LOCK)
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras \
		--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) constraints/lerobot.in -o $(LR_LOCK)

train: venv
	$(VENV)/bin/vla-rl train $(ARGS)

# The main suite, then the backends that need their own environment (see the README's backend table).
# The layer contracts (.importlinter) first: import-linter on the whole installed library.
test: venv ros
	$(PY) tests/import_graph.py
	$(VENV)/bin/pytest -q --ignore=tests/lerobot $(ARGS)
	$(MAKE) --no-print-directory test-metaworld
	$(MAKE) --no-print-directory test-libero
	$(MAKE) --no-print-directory test-lerobot
	$(MAKE) --no-print-directory docs

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on broken links and references.
# Not --quiet: mkdocs then drops warnings before --strict counts them, and a broken link passes.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: venv $(MW_STAMP)
	$(PY) -m benchmarks.run_all $(ARGS)

# On a machine with an NVIDIA GPU and a CUDA build of torch (set TORCH_SPEC to one): every GPU check
# in turn, each under a wall-clock cap, a failing one not stopping the rest (benchmarks/gpu_checks.py:
# the tests that skip without CUDA, MuJoCo Warp rollout over raw physics, PPO on 4,096 worlds,
# full-size pi0 updates in bfloat16, the pi0 Flow-SDE PPO recipe on 256 worlds, MuJoCo Warp against
# CPU MuJoCo). `ARGS="--budget-s 540"` starts only the checks that fit; `ARGS="--only pi0_update"` one.
bench-gpu: venv
	$(PY) -m benchmarks.gpu_checks $(ARGS)

# LIBERO's GPU checks (the LIBERO-Object start under the full protocol, 16 workers, RL) in .venv-libero,
# built with the same TORCH_SPEC.
bench-gpu-libero: $(LB_STAMP)
	MUJOCO_GL=egl PYOPENGL_PLATFORM=egl $(LB_VENV)/bin/python -m benchmarks.gpu_checks --suite libero \
		--python $(LB_VENV)/bin/python $(ARGS)

# For a GPU machine without the package index: the wheels the GPU checks need beyond a CUDA PyTorch
# install, at the lock's versions, in bundles under .gpu-kit/; there, benchmarks/gpu_device.sh
# installs them and runs the checks (docs/benchmarks.md, "On a GPU").
gpu-kit: venv
	$(PY) -m benchmarks.gpu_kit download $(ARGS)

# The same for the LIBERO checks (`benchmarks.gpu_checks --suite libero`): the LIBERO lock's wheels and
# the files of robosuite, LIBERO and its assets that LIBERO-Object opens, under .gpu-kit-libero/.
gpu-kit-libero: venv $(LB_STAMP)
	$(PY) -m benchmarks.gpu_kit_libero download $(ARGS)

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
	rm -rf $(VENV) $(MW_VENV) $(LB_VENV) $(LR_VENV) runs outputs build site *.egg-info

# MetaWorld 3.1 pins mujoco==3.3.0 while the main venv carries MuJoCo 4 (for MuJoCo Warp), so the
# metaworld backend gets its own venv; `make test-metaworld` runs its tests there.
$(MW_VENV): $(MW_STAMP)

$(MW_STAMP): pyproject.toml Makefile $(MW_LOCK)
	$(call install_locked,$(MW_VENV),$(MW_LOCK),$(MW_EXTRAS))

.PHONY: test-metaworld
test-metaworld: $(MW_STAMP)
	$(MW_VENV)/bin/pytest -q tests/conformance tests/sims/test_metaworld_*.py tests/data/test_metaworld_collect.py \
		tests/benchmarks/test_metaworld_protocol.py tests/benchmarks/test_metaworld_mt10_sft_rl.py \
		-k metaworld $(MW_ARGS)

# robosuite's own setup step (its scripts/setup_macros.py asks on stdin): a private copy of its default
# settings, without which every import logs three warnings through a deprecated logging call.
define ROBOSUITE_MACROS
import importlib.util, pathlib, shutil
folder = pathlib.Path(importlib.util.find_spec("robosuite").origin).parent
if not (folder / "macros_private.py").exists():
    shutil.copyfile(folder / "macros.py", folder / "macros_private.py")
endef
export ROBOSUITE_MACROS

# LIBERO needs robosuite 1.4 and a MuJoCo 3 below 3.9 (the main venv carries MuJoCo 4), so it gets its
# own venv: the lock's packages with the `libero` extra (robosuite, the scene assets), then LIBERO's
# own package without its dependencies (constraints/libero-nodeps.txt says why).
# `make test-libero` runs the conformance suite and the backend's tests on real LIBERO scenes there.
$(LB_VENV): $(LB_STAMP)

$(LB_STAMP): pyproject.toml Makefile $(LB_LOCK) constraints/libero-nodeps.txt
	$(call install_locked,$(LB_VENV),$(LB_LOCK),$(LB_EXTRAS))
	$(LB_VENV)/bin/python -m pip install --quiet --no-deps -r constraints/libero-nodeps.txt
	$(LB_VENV)/bin/python -c "$$ROBOSUITE_MACROS"
	touch $(LB_STAMP)

.PHONY: test-libero
test-libero: $(LB_STAMP)
	$(LB_VENV)/bin/pytest -q tests/conformance tests/sims/test_libero_*.py tests/benchmarks/test_libero_*.py \
		-k libero $(LB_ARGS)

# LeRobot 0.4 (the reference implementation of the parity and dataset tests) pins torch<2.8 and
# transformers<5, so it gets its own venv, installed exactly as constraints/lerobot.txt pins it (vla-rl
# itself is not installed there: needs transformers 5). `make test-lerobot` runs the main venv's pytest
# on tests/lerobot/, whose tests call scripts with LR_PYTHON and compare the files they write, and on gym-hil
# (its worlds run in this venv: gym-hil needs MuJoCo < 3.9) with the LeRobot SAC comparison's --quick run.
$(LR_VENV): $(LR_STAMP)

$(LR_STAMP): Makefile $(LR_LOCK)
	test -x $(LR_VENV)/bin/python || $(PYTHON) -m venv $(LR_VENV)
	$(LR_VENV)/bin/python -m pip install --quiet -c $(LR_LOCK) pip setuptools wheel
	$(LR_VENV)/bin/python -m pip install --quiet -r $(LR_LOCK)
	touch $(LR_STAMP)

.PHONY: test-lerobot
test-lerobot: venv $(LR_STAMP)
	LR_PYTHON=$(abspath $(LR_VENV))/bin/python $(VENV)/bin/pytest -q tests/lerobot tests/sims/test_gym_hil.py \
		tests/benchmarks/test_gym_hil_sac.py $(LR_ARGS)
