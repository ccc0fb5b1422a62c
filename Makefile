# Two entry points (README): `make reproduce` and `make test`.  Both create and reuse .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

# Real public traces come from the download cache, or from an offline copy named by LACHESIS_DATA
# (set it yourself; nothing outside the repository is assumed).
export MPLBACKEND ?= Agg

.PHONY: reproduce test bench clean-build

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

## Regenerate every table and figure in figures/ at paper scale (papermill, notebooks/params/paper.yaml).
## Streams each notebook's progress; ends with a summary and fails if a notebook failed or a source is missing.
reproduce: $(STAMP)
	$(VENV)/bin/lachesis reproduce --params notebooks/params/paper.yaml

## Unit, property, differential and validation tests, plus every notebook through nbval at a small scale.
test: $(STAMP)
	$(PY) -m pytest -q tests --nbval-lax notebooks --nbval-current-env -p no:cacheprovider

## Print the speed benchmarks (not a test).
bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b; done

clean-build:
	rm -rf build
