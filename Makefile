# The book's commands. `make book` and `make test` are the two that matter; see README.md.
SHELL      := /bin/bash
PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
PROFILE    ?= quick
P          ?=
FORCE      ?=
FIG        ?= stability
EXECUTOR   ?= local
SLURM      ?=
PYTEST_ARGS ?=
# Offline copies of the data sets (e.g. ../shared/data); unset = download into data/ when online.
DATA_DIR   ?=
ifneq ($(strip $(DATA_DIR)),)
export I2O_DATA_DIR := $(abspath $(DATA_DIR))
endif
# Two cores: one thread per process unless told otherwise.
export OMP_NUM_THREADS ?= 1
export I2O_THREADS ?= 1
export XLA_FLAGS ?= --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1

INSTALLED  := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
FIGURES     = $(shell $(PY) -m i2o.book figures)
RUN_FLAGS   = --profile $(PROFILE) $(if $(FORCE),--force,)

.PHONY: install book html test bench sweep claims lint clean clean-results help

help:
	@echo "make book            execute every figure notebook (PROFILE=$(PROFILE)) and build _build/html"
	@echo "make fig-<name>      one figure, e.g. make fig-affine PROFILE=paper P=\"-p n_seeds 50\""
	@echo "make test            run the test suite"
	@echo "make bench           performance measurements into _build/bench.json"
	@echo "make sweep FIG=stability EXECUTOR=local|slurm SLURM=\"--partition gpu --gpus 1\""
	@echo "make claims          print every executed notebook's claims"
	@echo "make clean           remove build products; make clean-results removes the results cache"

$(INSTALLED): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[book,dev,bench]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(INSTALLED)

book: $(INSTALLED)
	$(PY) -m i2o.book all $(RUN_FLAGS)
	$(PY) -m i2o.book html

html: $(INSTALLED)
	$(PY) -m i2o.book html

fig-%: $(INSTALLED)
	$(PY) -m i2o.book run $* $(RUN_FLAGS) $(P)
	$(PY) -m i2o.book html

test: $(INSTALLED)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(INSTALLED)
	$(PY) benchmarks/run.py

sweep: $(INSTALLED)
	$(PY) -m i2o.sweep $(FIG) --profile $(PROFILE) --executor $(EXECUTOR) $(SLURM) $(P)

claims: $(INSTALLED)
	$(PY) -m i2o.claims

lint: $(INSTALLED)
	$(PY) -m ruff check src tests benchmarks

clean:
	rm -rf _build

clean-results:
	rm -rf data/results data/cache
