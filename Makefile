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
REPLICATES ?= 0 1 2
FIGURES    ?=
WORKERS    ?= 1
# RECORD=1: `make book` and `make fig-*` append each executed notebook's timing (and the whole
# book's) to published/timings.json, the Reproduce page's measured costs (i2o.compute.timings); `make
# book RECORD=1` also writes every job's recorded cost to published/job-costs.json (i2o.compute.job_costs).
RECORD     ?=
# `make publish` writes published/<KIND>-<PROFILE>.json (robustness or numbers).
KIND       ?= robustness
SLURM      ?=
PYTEST_ARGS ?=
# Offline copies of the data sets (e.g. ../shared/data); unset = download into data/ when online.
DATA_DIR   ?=
# `make data` fetches these data sets (empty: all of them), e.g. DATASETS=shakespeare.
DATASETS   ?=
# Passed as given (Make's abspath would split a path with spaces); i2o makes it absolute.
ifneq ($(strip $(DATA_DIR)),)
export I2O_DATA_DIR := $(DATA_DIR)
endif
# Two cores: one thread per process unless told otherwise.
export OMP_NUM_THREADS ?= 1
export I2O_THREADS ?= 1
export XLA_FLAGS ?= --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1

# The whole environment, pinned with hashes (`make lock` regenerates it from pyproject.toml).
LOCK       := requirements.lock
UV_VERSION := 0.13.9
# The install marker is keyed on the lock (and pyproject.toml, for the editable install itself).
INSTALLED  := $(VENV)/.installed-$(shell cat $(LOCK) pyproject.toml | sha256sum | cut -c1-12)
# MathJax served by the book itself (math renders offline), pinned by package-lock.json.
MATHJAX    := node_modules/.installed-mathjax
FIGURES     = $(shell $(PY) -m i2o.book figures)
RUN_FLAGS   = --profile $(PROFILE) $(if $(FORCE),--force,) $(if $(RECORD),--record-timing,)

.PHONY: install lock data book html test bench golden sweep robustness publish claims lint clean clean-results help

help:
	@echo "make book            execute every figure notebook (PROFILE=$(PROFILE), WORKERS=N job processes) and build _build/html"
	@echo "                     RECORD=1: append the timings to published/timings.json (from an empty cache: make clean-results first)"
	@echo "make fig-<name>      one figure, e.g. make fig-affine PROFILE=paper P=\"-p n_seeds 50\""
	@echo "make data            fetch and verify the data sets once (DATA_DIR=... for a local copy)"
	@echo "make test            run the test suite"
	@echo "make lock            regenerate requirements.lock from pyproject.toml (needs PyPI)"
	@echo "make bench           performance measurements into _build/bench.json"
	@echo "make golden          rewrite tests/golden/ (smoke fingerprints, numerics probes) after a change meant to change results"
	@echo "make sweep FIG=stability EXECUTOR=local|slurm SLURM=\"--partition gpu --gpus 1\""
	@echo "make robustness      every chapter at replicates 0 1 2 (REPLICATES=...) -> Robustness page"
	@echo "make publish         keep the last robustness run (KIND=numbers: the last build) in published/, shown by the book (FIGURES=meta: those chapters only)"
	@echo "make claims          print every executed notebook's claims"
	@echo "make clean           remove build products; make clean-results removes the results cache"

$(INSTALLED): $(LOCK) pyproject.toml
	@$(PYTHON) scripts/check_python.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-* && touch $@

install: $(INSTALLED) $(MATHJAX)

$(MATHJAX): package-lock.json
	npm ci --no-audit --no-fund && touch $@ \
	  || echo "warning: npm ci failed; the book's math will load from a CDN"

# Regenerate requirements.lock after a change of pyproject.toml's pins (needs PyPI; uv in its own
# venv, .venv-lock). Versions already in the lock are kept unless pyproject asks otherwise.
lock:
	@$(PYTHON) scripts/check_python.py
	test -x .venv-lock/bin/uv || ($(PYTHON) -m venv .venv-lock \
	  && .venv-lock/bin/pip install --quiet uv==$(UV_VERSION))
	cp $(LOCK) $(LOCK).new 2>/dev/null || true
	.venv-lock/bin/uv pip compile --quiet pyproject.toml --extra book --extra dev --extra bench \
	  --universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock" \
	  -o $(LOCK).new
	@# replaced only when it changed (an unchanged lock does not trigger a reinstall)
	if cmp -s $(LOCK) $(LOCK).new; then rm $(LOCK).new; echo "$(LOCK) unchanged"; \
	else mv $(LOCK).new $(LOCK); echo "$(LOCK) updated: make install"; fi

# Data sets first (fetched, verified), then every chapter's missing jobs in one pool of local
# processes (WORKERS=N; default: the cores this process may use, capped by the jobs' recorded
# memory), then every chapter that can run, then the HTML; a chapter that could not be built is
# named at the end (one line each) and the exit status is non-zero.
book: $(INSTALLED) $(MATHJAX)
	$(PY) -m i2o.book book $(RUN_FLAGS) \
	  $(if $(filter command line environment environment override,$(origin WORKERS)),--workers $(WORKERS),)

data: $(INSTALLED)
	$(PY) -m i2o.data.fetch $(DATASETS)

html: $(INSTALLED) $(MATHJAX)
	$(PY) -m i2o.book html

fig-%: $(INSTALLED) $(MATHJAX)
	$(PY) -m i2o.book run $* $(RUN_FLAGS) $(P)
	$(PY) -m i2o.book html

# The 25 slowest tests are listed at the end, to keep the suite within its 15-minute budget.
# The numerics pins in pytest's environment from its start: on an AMD EPYC of family 26 the pins
# that `import i2o` sets in a running process were not honoured (torch AVX-512, NumPy X86_V4).
test: $(INSTALLED) $(MATHJAX)
	eval "$$($(PY) -m i2o.pins env)" && $(PY) -m pytest --durations=25 $(PYTEST_ARGS)

bench: $(INSTALLED)
	$(PY) benchmarks/run.py

# The golden fingerprints of tests/golden/: every smoke notebook executed afresh, its results and
# the numerics probes fingerprinted (portable mode). Say in the commit why results changed.
golden: $(INSTALLED) $(MATHJAX)
	$(PY) -m i2o.provenance.golden

sweep: $(INSTALLED)
	$(PY) -m i2o.data.preflight $(FIG)
	$(PY) -m i2o.sweep $(FIG) --profile $(PROFILE) --executor $(EXECUTOR) $(SLURM) $(P)

# Every chapter at several replicates (every random choice redrawn), through the results cache;
# writes _build/robustness.json, shown on the book's Robustness page after `make html`.
robustness: $(INSTALLED)
	$(PY) -m i2o.provenance.robustness --profile $(PROFILE) --replicates $(REPLICATES) \
	  $(if $(FIGURES),--figures $(FIGURES),) --workers $(WORKERS)
	$(PY) -m i2o.book html

# Keeps a summary measured here in published/ (committed), which the book shows, marked current or
# stale, when a build has not computed its own.
publish: $(INSTALLED)
	$(PY) -m i2o.book.published $(KIND) --profile $(PROFILE) \
	  $(if $(filter command line,$(origin FIGURES)),--figures $(FIGURES),)

claims: $(INSTALLED)
	$(PY) -m i2o.verdicts.claims

lint: $(INSTALLED)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy

clean:
	rm -rf _build

clean-results:
	rm -rf data/results data/cache
