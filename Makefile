# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
# Both create .venv (Python 3.11) and install the pinned requirements on first use.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= runs/demo

.PHONY: setup setup-gpu demo demo-i3d test test-fast stress bench bench-cluster clean

$(STAMP): requirements.txt requirements-tfkeras.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-test.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-tfkeras.txt
	touch $@

setup: $(STAMP)

# GPU machines: the same versions with tensorflow[and-cuda] instead of tensorflow-cpu.
setup-gpu:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-gpu.txt -r requirements-test.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-tfkeras.txt
	touch $(STAMP)

# Digits demo: convert scikit-learn's 1,797 real handwritten digits, train LeNet on two
# logical CPU devices (2 clones), then evaluate on the held-out test split.
demo: setup
	$(PY) -m datasets.convert_images --dataset_name=digits --output_dir=$(DEMO_DIR)/data
	rm -rf $(DEMO_DIR)/train $(DEMO_DIR)/eval
	$(PY) train_image_classifier.py --flagfile=configs/digits_lenet_2xcpu.cfg \
	    --dataset_dir=$(DEMO_DIR)/data --train_dir=$(DEMO_DIR)/train
	$(PY) eval.py --dataset_name=digits --dataset_split_name=test --model_name=lenet \
	    --dataset_dir=$(DEMO_DIR)/data --checkpoint_path=$(DEMO_DIR)/train \
	    --eval_dir=$(DEMO_DIR)/eval --min_accuracy=0.95

# I3D (depth 0.25) from scratch on synthetic videos whose classes differ only in motion
# direction: 2 clones on 2 logical CPUs, 16x112x112 clips, about 15 minutes; eval >= 0.9.
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
	$(PY) eval.py --dataset_name=video_folder --dataset_dir=$(I3D_DIR)/data \
	    --dataset_split_name=test --model_name=i3d --depth_multiplier=0.25 --clip_frames=16 \
	    --eval_image_size=112 --eval_clips=1 --checkpoint_path=$(I3D_DIR)/train \
	    --eval_dir=$(I3D_DIR)/eval --min_accuracy=0.9

test: setup
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow and not cluster"

# The cluster tests (sync equivalence, chief kill, ps kill, end of job) 30 times each with
# both cores kept busy beside them; failures and leaked processes per test (about 95 minutes).
stress: setup
	$(PY) benchmarks/stress.py

# Every benchmark of docs/benchmarks.md (about 20 minutes; run it on a quiet machine).
bench: setup
	$(PY) benchmarks/clones.py
	$(PY) benchmarks/input_pipeline.py
	$(PY) benchmarks/cluster.py

# 1 ps + 1 worker vs 1 ps + 2 workers, each worker on its own core (docs/benchmarks.md).
bench-cluster: setup
	$(PY) benchmarks/cluster.py

clean:
	rm -rf runs .pytest_cache
