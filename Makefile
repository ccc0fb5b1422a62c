# Entry points (README): `make reproduce`, `make test`, `make lab`.  All create and reuse .venv; `make` alone lists
# every target (make help).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
LOCK   := requirements.lock

# Real public traces come from the download cache (`make reproduce` fills it), or from an offline copy named by
# LACHESIS_DATA (set it yourself; nothing outside the repository is assumed).
# Headless plotting in this shell's processes; notebook kernels draw inline whatever this says (lachesis.reproduce).
export MPLBACKEND ?= Agg

.PHONY: help reproduce numbers reproduce-ci lint stubs test test-fast lab explore lock browser-check bench clean-build
.DEFAULT_GOAL := help

## List every target with what it does (the comment above it); `make` alone prints this.
help:
	@awk 'function show(t, s,  n, w, i, line) { n = split(s, w, " "); line = sprintf("  make %-14s", t); \
	        for (i = 1; i <= n; i++) { if (length(line) + length(w[i]) > 118) { print line; line = sprintf("%21s", "") } \
	                                   line = line " " w[i] } print line } \
	      /^## /{text = text " " substr($$0, 4); next} \
	      /^[a-z][a-z-]*:/{if (text) {split($$0, t, ":"); show(t[1], text)}; text = ""; next} \
	      /^$$/{text = ""}' $(MAKEFILE_LIST)

# The package and its test extras, pinned to the environment that produced figures/ (requirements.lock).
$(STAMP): pyproject.toml setup.py $(LOCK) $(wildcard lachesis/node/native/*/*.cpp lachesis/node/native/*/*.hpp lachesis/node/native/build_record.py)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (lachesis)" >/dev/null
	touch $@

## Regenerate every table and figure in figures/ at paper scale (papermill, notebooks/params/paper.yaml), fetching
## the public real traces it needs (checksummed); offline, everything else, naming what it could not fetch.
## STRICT=1: a source that could not be fetched is an error.  Each notebook also becomes two pages in
## figures/notebooks/ (NAME.html, opening on its figure, and NAME.ipynb, which GitHub renders; index.html lists them);
## progress goes to build/logs/NAME.log; figures/ENVIRONMENT.json records the sources and every figure's sha256.
reproduce: $(STAMP)
	$(VENV)/bin/lachesis reproduce --params notebooks/params/paper.yaml $(if $(STRICT),--strict)

## After a reproduce that changed figures/: rewrite the README's claim-ledger block and docs/results.md's table from
## them, and name every README sentence whose numbers the new figures no longer print (tests hold all three).
numbers: $(STAMP)
	$(PY) -m lachesis.readme_numbers

## The same notebooks at CI scale, into build/figures (pages in build/figures/notebooks; a few minutes).
reproduce-ci: $(STAMP)
	$(VENV)/bin/lachesis reproduce --params notebooks/params/ci.yaml

## The linter (ruff: the package, tests, notebooks, benchmarks) and the type checker (mypy, basic mode, on the package);
## both configured in pyproject.toml and run first by `make test` and `make test-fast`.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy

## The native core's type stubs (lachesis/node/_core.pyi, what mypy checks the calls into the core against), written
## from the built module by pybind11-stubgen; run after changing a binding (tests/node/test_native_contract.py checks).
stubs: $(STAMP)
	$(PY) scripts/core_stubs.py

## Unit, property, differential and validation tests, plus every notebook through nbval at a small scale
## (each must show an inline figure: notebooks/conftest.py).
test: $(STAMP) lint
	$(PY) -m pytest -q tests --nbval-lax notebooks --nbval-current-env -p no:cacheprovider

## The fast lane (about 2 min on 2 cores): the tests without the `slow` marker (pyproject.toml: long simulated runs,
## capacity searches, ranker fits, notebook kernels, process pools, the Dask cluster) and no notebooks.
## `make test` still runs everything.
test-fast: $(STAMP) lint
	$(PY) -m pytest -q tests -m "not slow" -p no:cacheprovider

## JupyterLab on copies of the notebooks in build/lab/notebooks/ (the package's kernel; figures inline; paths still
## resolve from the repository root), so running and saving them never touches the sources in notebooks/.  A copy is
## made when missing or older than its source (delete it for a fresh one).  ARGS passes options to JupyterLab (e.g.
## make lab ARGS="--port 8890 --no-browser"); as root, --allow-root is added.
LAB_ARGS = $(if $(filter 0,$(shell id -u)),--allow-root) $(ARGS)
LAB_DIR := build/lab/notebooks
LAB_COPIES := $(patsubst notebooks/%,$(LAB_DIR)/%,$(wildcard notebooks/*.ipynb))
$(LAB_DIR)/%.ipynb: notebooks/%.ipynb
	@mkdir -p $(@D) && cp $< $@
lab: $(STAMP) $(LAB_COPIES)
	MPLBACKEND=module://matplotlib_inline.backend_inline $(VENV)/bin/jupyter lab --notebook-dir=build/lab $(LAB_ARGS) $(LAB_DIR)/explorer.ipynb

## The explorer on the paper-scale results (the cache `make reproduce` fills) in JupyterLab: a copy with the paper's
## parameters in build/ (never the source notebook); Run > Run All Cells, then the dropdowns move over the grid.
PAPER_EXPLORER := {interactive: true, source: cache, cache_dir: build/sweep_cache_paper, search: paper, scale: 1.0, seeds: '0,1,2', memory: '4/4', fractions: '0.1,0.2,0.3,0.45,0.6,0.8', knobs: '', compute: grid}
explore: $(STAMP)
	$(VENV)/bin/papermill notebooks/explorer.ipynb build/explorer_paper.ipynb --prepare-only -y "$(PAPER_EXPLORER)"
	MPLBACKEND=module://matplotlib_inline.backend_inline $(VENV)/bin/jupyter lab --notebook-dir=. $(LAB_ARGS) build/explorer_paper.ipynb

## Rewrite requirements.lock from .venv with every extra installed (test, dask, browser), then the build requirements
## pyproject.toml pins (after changing dependencies; commit it with the figures it produced).
BUILD_REQUIRES = $(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')"
lock: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,browser]'
	{ echo "# The environment that produced figures/ (make lock: pip freeze of .venv with every extra, editable lachesis"; \
	  echo "# excluded). make installs with it as constraints: pip install -c requirements.lock -e '.[test]'."; \
	  $(PY) -m pip freeze --exclude-editable; \
	  echo "# The build requirements ([build-system] requires in pyproject.toml, pinned there: pip builds in isolation)."; \
	  $(BUILD_REQUIRES); } > $(LOCK).tmp && mv $(LOCK).tmp $(LOCK)

## JupyterLab in headless chromium: open and run the explorer, change a dropdown, screenshots in build/browser/.
## Needs chromium + chromedriver (apt-get install chromium chromium-driver) and the [browser] extra (selenium).
browser-check: $(STAMP)
	$(PY) -c "import selenium" 2>/dev/null || $(PY) -m pip install --quiet -c $(LOCK) -e '.[browser]'
	$(PY) scripts/browser_check.py --out build/browser

## Print the speed benchmarks (not a test).
bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b; done

## Remove build/ (the CI-scale figures, the sweep caches, the lab copies, the logs).
clean-build:
	rm -rf build
