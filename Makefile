# Two entry points, both safe on a fresh clone:
#   make demo   set up .venv and evaluate the built-in example app
#   make test   set up .venv and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.torchport-installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch; the pin keeps development and CI on the same build.
	$(PY) -m pip install --quiet torch==2.13.0
	# The hf extra (transformers) too, so the hf: specs are tested; `env create xla`
	# below then adds the same transformers to the xla environment.
	$(PY) -m pip install --quiet -e '.[test,hf]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/torchport evaluate

test: $(STAMP)
	# The xla backend's own environment (torch 2.9.0 + torch_xla 2.9.0, ~7 GB,
	# a few minutes the first time, then reused from ~/.cache/torchport), with
	# transformers when the hf extra is installed (added to an existing one).
	$(VENV)/bin/torchport env create xla
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) torchport-results .pytest_cache
