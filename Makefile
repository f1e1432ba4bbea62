# Two entry points, both safe on a fresh clone:
#   make demo   set up .venv and evaluate the built-in example app
#   make test   set up .venv and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.torchport-installed

.PHONY: demo test setup clean browser

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch; the pin keeps development and CI on the same build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/torchport evaluate

test: $(STAMP) browser
	# The xla backend's own environment (torch 2.9.0 + torch_xla 2.9.0, ~7 GB,
	# a few minutes the first time, then reused from ~/.cache/torchport).
	$(VENV)/bin/torchport env create xla
	# The tpu backends' environment (CPU torch 2.13.0 + torch_tpu 0.2.0 + libtpu,
	# 1.9 GB, ~3.5 min the first time): the TorchTPU API-surface and op-table tests run in it.
	$(VENV)/bin/torchport env create tpu
	$(PY) -m pytest -q

# Debian's chromium, for the tests that look at the HTML report in a browser.
# Installed when missing and the machine allows (apt-get, as root or with
# password-less sudo); otherwise those tests skip and say why.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "chromium missing and no apt-get: the browser tests will skip"; \
	else SUDO=; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	  if [ -n "$$SUDO" ] && ! sudo -n true 2>/dev/null; then echo "chromium missing and not root: the browser tests will skip"; \
	  else ( DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 \
	      || { $$SUDO apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; } ) \
	    || echo "could not install chromium: the browser tests will skip"; fi; fi

clean:
	rm -rf $(VENV) torchport-results .pytest_cache
