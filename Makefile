# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
# Both create .venv (Python 3.11) and install the pinned requirements on first use.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= runs/demo

.PHONY: setup setup-parts setup-gpu jpeg-op jpeg-headers lock demo demo-digits demo-i3d lint test test-fast test-heavy stress chaos bench bench-cluster bench-data-service bench-gpu clean

# The lock (constraints.txt, `make lock`) pins every package, indirect ones and pip too;
# requirements.txt names it itself, and it is given here for every pip call that reads
# it. tf-keras goes in with --no-deps (why: requirements-tfkeras.txt). pip installs without
# compiling, and $(BYTECODE) compiles the venv's modules on both cores beside the op's
# build (pip compiles on one core, a third of its time): the compiled files must be there,
# since an environment with PYTHONDONTWRITEBYTECODE never writes them on import and every
# start would compile TensorFlow again.
$(STAMP): requirements.txt requirements-test.txt requirements-tfkeras.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints.txt
	$(PY) -m pip install --quiet --no-compile -r requirements.txt -r requirements-test.txt \
	    -c constraints.txt
	$(PY) -m pip install --quiet --no-compile --no-deps -r requirements-tfkeras.txt
	touch $@

# Files that do not compile (a Python 2 module in scikit-video) are left out, as pip does.
BYTECODE := $(VENV)/.bytecode-stamp
$(BYTECODE): $(STAMP)
	$(PY) -m compileall -q -j 0 \
	    $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))') >/dev/null || true
	touch $@

# Defined before `setup-parts`, whose prerequisites make expands as it reads the rule: after
# it, $(JPEG_OP) would be empty there and a fresh clone would never build the op.
# The clip pipeline's custom op (datasets/inputs/jpeg_windows.py, docs/benchmarks.md issue
# 23): built against the TensorFlow of $(PY) (.venv's: rebuilt after a reinstall; another
# venv's with `make jpeg-op PY=python`) and the system's libjpeg-turbo, whose headers (and
# g++) are installed with apt-get when missing, as the tests install Slurm (as root;
# otherwise one line saying what to install).
JPEG_OP := datasets/inputs/ops/jpeg_windows.so
JPEG_OP_SOURCE := datasets/inputs/ops/jpeg_windows.cc
JPEG_OP_VENV := $(if $(filter $(PY),$(VENV)/bin/python),$(STAMP))
# TensorFlow's compile flags and link flags, a line each, from one import (4-5 s each).
TF_FLAGS = TF_CPP_MIN_LOG_LEVEL=3 $(PY) -c 'import tensorflow as tf; \
    print(" ".join(tf.sysconfig.get_compile_flags())); \
    print(" ".join(tf.sysconfig.get_link_flags()))'
$(JPEG_OP): $(JPEG_OP_SOURCE) $(JPEG_OP_VENV)
	@printf '#include <stdio.h>\n#include <jpeglib.h>\n' | $(CXX) -E -x c++ - >/dev/null 2>&1 \
	    || $(MAKE) --no-print-directory jpeg-headers
	flags="$$($(TF_FLAGS))" && $(CXX) -O2 -shared -fPIC -Wno-deprecated-declarations \
	    -Wno-interference-size $$(echo "$$flags" | sed -n 1p) $(JPEG_OP_SOURCE) -o $@ \
	    $$(echo "$$flags" | sed -n 2p) -ljpeg

jpeg-op: $(JPEG_OP)

# The venv first, then its compiled modules and the op at once (2 jobs).
setup: $(STAMP)
	@$(MAKE) --no-print-directory -j2 setup-parts

setup-parts: $(BYTECODE) $(JPEG_OP)
	@:

jpeg-headers:
	@if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	    echo "g++ or libjpeg-turbo's headers are missing and cannot be installed here (needs" \
	        "root and apt-get): apt-get install -y g++ libjpeg-dev" >&2; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ libjpeg-dev

# GPU machines: the same versions with tensorflow[and-cuda] instead of tensorflow-cpu.
setup-gpu:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints-gpu.txt
	$(PY) -m pip install --quiet -r requirements-gpu.txt -r requirements-test.txt \
	    -c constraints-gpu.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-tfkeras.txt
	touch $(STAMP)
	$(MAKE) --no-print-directory jpeg-op

# Regenerates constraints.txt and constraints-gpu.txt from the requirements files alone
# (their own -c lines dropped, so every indirect dependency is resolved afresh), in a
# scratch venv: the CPU lock is what a real install holds (`pip freeze --all`), the GPU
# lock what pip would install there (`--dry-run --report`, so no CUDA wheel is installed),
# for this Python on Linux x86_64. About 3 minutes with the pip cache.
LOCK_VENV ?= /tmp/slimdeploy-lock-venv
LOCK_PY := $(LOCK_VENV)/bin/python
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_PY) -m pip install --quiet --upgrade pip
	$(LOCK_PY) -m pip freeze --all > $(LOCK_VENV)/bare.txt
	sed '/^-c /d' requirements.txt > $(LOCK_VENV)/requirements.txt
	sed '/^-c /d' requirements-gpu.txt > $(LOCK_VENV)/requirements-gpu.txt
	$(LOCK_PY) -m pip install --quiet --dry-run --report $(LOCK_VENV)/gpu.json \
	    -r $(LOCK_VENV)/requirements-gpu.txt -r requirements-test.txt
	$(LOCK_PY) -m pip install --quiet -r $(LOCK_VENV)/requirements.txt -r requirements-test.txt
	$(LOCK_PY) -m pip install --quiet --no-deps -r requirements-tfkeras.txt
	{ echo "$$LOCK_HEADER_CPU"; $(LOCK_PY) -m pip freeze --all; } > constraints.txt
	{ echo "$$LOCK_HEADER_GPU"; $(LOCK_PY) -c "$$LOCK_FROM_REPORT" $(LOCK_VENV)/gpu.json \
	    $(LOCK_VENV)/bare.txt requirements-tfkeras.txt; } > constraints-gpu.txt
	rm -rf $(LOCK_VENV)

define LOCK_HEADER_COMMON
# Used as `pip install -c` (the requirements files name it themselves): it pins every
# package, direct and indirect, so two installs a month apart are the same. Generated by
# `make lock`: do not edit it by hand; change a requirements file, then run that. tf-keras
# is pinned here too but installed apart with --no-deps: it declares a dependency on the
# `tensorflow` wheel, which would land on top of `tensorflow-cpu` (requirements-tfkeras.txt).
endef
define LOCK_HEADER_CPU
# constraints.txt: the lock of requirements.txt + requirements-test.txt +
# requirements-tfkeras.txt (CPU build), as `pip freeze --all` of a fresh install.
$(LOCK_HEADER_COMMON)
endef
define LOCK_HEADER_GPU
# constraints-gpu.txt: the lock of requirements-gpu.txt + requirements-test.txt +
# requirements-tfkeras.txt as pip resolves it for Linux x86_64 and Python 3.11 (`pip
# install --dry-run --report`: the CUDA wheels are never installed by `make lock`); pip and
# setuptools are a fresh venv's.
$(LOCK_HEADER_COMMON)
endef
# name==version for every package the report would install, then the pins of the other
# files (the fresh venv's pip and setuptools, tf-keras) for names the report lacks.
define LOCK_FROM_REPORT
import json, sys
report, *pin_files = sys.argv[1:]
pins = {i['metadata']['name']: i['metadata']['version']
        for i in json.load(open(report))['install']}
for path in pin_files:
    for line in open(path):
        if '==' in line and not line.startswith('#'):
            name, version = line.strip().split('==')
            pins.setdefault(name, version)
for name in sorted(pins, key=str.lower):
    print('%s==%s' % (name, pins[name]))
endef
export LOCK_HEADER_CPU LOCK_HEADER_GPU LOCK_FROM_REPORT

# The video demo (demo.py): synthetic motion videos, conversion, I3D from scratch with 2
# clones on 2 logical CPUs, evaluation (>= 0.9), export and a prediction on a held-out
# video, then a summary with each stage's time and the TensorBoard command.
demo: setup
	$(PY) demo.py --output_dir=$(DEMO_DIR)

# Digits demo: convert scikit-learn's 1,797 real handwritten digits, train LeNet on two
# logical CPU devices (2 clones), then evaluate on the held-out test split (the network
# and data from the run's record, train/flags.cfg).
DIGITS_DIR ?= runs/digits
demo-digits: setup
	$(PY) -m datasets.convert_images --dataset_name=digits --output_dir=$(DIGITS_DIR)/data
	rm -rf $(DIGITS_DIR)/train $(DIGITS_DIR)/eval
	$(PY) train_image_classifier.py --flagfile=configs/digits_lenet_2xcpu.cfg \
	    --dataset_dir=$(DIGITS_DIR)/data --train_dir=$(DIGITS_DIR)/train
	$(PY) eval.py --checkpoint_path=$(DIGITS_DIR)/train --dataset_split_name=test \
	    --eval_dir=$(DIGITS_DIR)/eval --min_accuracy=0.95

# I3D (depth 0.25) from scratch on synthetic videos whose classes differ only in motion
# direction: 2 clones on 2 logical CPUs, 16x112x112 clips, about 15 minutes; eval >= 0.9
# (network, width, data, clip and crop from the run's record).
I3D_DIR ?= runs/i3d
demo-i3d: setup
	rm -rf $(I3D_DIR)/videos $(I3D_DIR)/data $(I3D_DIR)/train $(I3D_DIR)/eval
	$(PY) -m datasets.make_synthetic_videos --output_dir=$(I3D_DIR)/videos --num_classes=4 \
	    --videos_per_class=48 --sizes=112x144,120x160 --min_frames=8 --max_frames=48
	$(PY) -m datasets.convert_videos --dataset_name=video_folder \
	    --video_dir=$(I3D_DIR)/videos/videos --splits_dir=$(I3D_DIR)/videos/splits \
	    --output_dir=$(I3D_DIR)/data --short_side=128 --num_shards=4 --num_processes=2
	$(PY) train_image_classifier.py --flagfile=configs/synthetic_i3d_rgb_scratch_2xcpu_16f.cfg \
	    --dataset_dir=$(I3D_DIR)/data --train_dir=$(I3D_DIR)/train
	$(PY) eval.py --checkpoint_path=$(I3D_DIR)/train --dataset_split_name=test \
	    --eval_dir=$(I3D_DIR)/eval --min_accuracy=0.9

# One pass: the test files on three pytest-xdist workers (a file's tests on one worker so
# its module fixtures are made once; with three the cores stay about 95 % busy while a test
# waits on real processes). The `timing` tests, whose figures come from elapsed time and
# CPU share, run in it too: their contrasts are built in (a starved input against a plain
# one, a sleep as a bound), so load only lengthens what they compare. Then the check that
# the pass left no process of ours running (tests/leftovers.py: daemons, servers, tasks;
# each listed); the target fails if the pass failed or anything was left.
TEST_WORKERS ?= 3
test: lint setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not heavy"; \
	passed=$$?; $(PY) -m tests.leftovers; left=$$?; \
	test $$passed -eq 0 -a $$left -eq 0

# The linter, ruff from the lock (requirements-test.txt), on the whole tree with the rules
# of ruff.toml; under a second. `make test` runs it first, before the op's build, so CI
# fails on an unused or undefined name in seconds.
lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .

test-fast: setup
	$(PY) -m pytest -m "not slow and not cluster"

# The full forms of scenarios `make test` runs reduced (pytest marker `heavy`): the whole
# narrow I3D compiled by XLA through the trainer against the uncompiled run (about 2
# minutes on 2 cores, 4 with other work beside it).
test-heavy: setup
	$(PY) -m pytest -m heavy

# The seeds' ten-node cluster simulated (benchmarks/chaos.py: 2 ps + 10 workers, 2 of them
# backups, random workers and the chief killed and restarted during the run; every promise
# checked, under 10 minutes), then the cluster tests (sync equivalence, chief kill, ps kill,
# end of job) 30 times each with both cores kept busy beside them; failures and leaked
# processes per test (about 95 minutes).
stress: setup
	$(PY) -m benchmarks.chaos
	$(PY) -m tests.stress

# The chaos run alone (about 5 minutes on 2 cores).
chaos: setup
	$(PY) -m benchmarks.chaos

# Every benchmark of docs/benchmarks.md and the capacity of docs/cluster.md (about 35
# minutes; run it on a quiet machine).
bench: setup
	$(PY) -m benchmarks.clones --variable_updates=parameter_server,replicated
	$(PY) -m benchmarks.input_pipeline
	$(PY) -m benchmarks.input_pipeline --long_videos
	$(PY) -m benchmarks.cluster
	$(PY) -m benchmarks.capacity
	$(PY) -m benchmarks.data_service

# float32 vs float16 vs bfloat16, XLA off and on, 1..N GPUs, for I3D 64x224x224 and
# cifarnet (docs/benchmarks.md); without a GPU a CPU smoke check at small sizes.
bench-gpu: setup
	$(PY) -m benchmarks.gpu_speed

# 1 ps + 1 worker vs 1 ps + 2 workers, each worker on its own core (docs/benchmarks.md);
# then the all-reduce side by side (issue 40): 1 ps + 2 synchronous workers, two
# independent jobs and 2 workers without ps, in the same rounds.
bench-cluster: setup
	$(PY) -m benchmarks.cluster
	$(PY) -m benchmarks.cluster --sync --two_jobs --allreduce

# Local input against one pinned data worker of a tf.data service, trainer on core 0, the
# worker on core 1 (docs/benchmarks.md; about 5 minutes).
bench-data-service: setup
	$(PY) -m benchmarks.data_service

clean:
	rm -rf runs .pytest_cache
