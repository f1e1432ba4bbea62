# Two entry points, both safe on a fresh clone:
#   make demo   set up .venv and evaluate the built-in example app
#   make test   set up .venv, lint and type-check, and run the whole test suite
#   (make lint  the lint and type check alone)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.torchport-installed
# pytest-xdist workers for `make test`: two suit a 2-core CI machine; more share
# a larger one's cores, but each test starts worker processes of its own.
TEST_WORKERS ?= 2

.PHONY: demo test lint setup clean browser sshd sky

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

# Before the tests (and the environments they need), so a lint or type error
# fails `make test` in seconds; configured in pyproject.toml ([tool.ruff], [tool.mypy]).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

test: $(STAMP) lint browser sshd sky
	# The xla backend's own environment (torch 2.9.0 + torch_xla 2.9.0, ~7 GB,
	# a few minutes the first time, then reused from ~/.cache/torchport), with
	# transformers when the hf extra is installed (added to an existing one);
	# and, made at the same time (separate folders, pip's cache shared), the tpu
	# backends' environment (CPU torch 2.13.0 + torch_tpu 0.2.0 + libtpu, 1.9 GB,
	# ~3.5 min the first time): the TorchTPU API-surface and op-table tests run in it.
	$(VENV)/bin/torchport env create tpu > $(VENV)/env-create-tpu.log 2>&1 & tpu=$$!; \
	$(VENV)/bin/torchport env create xla; xla=$$?; \
	wait $$tpu; tpu=$$?; cat $(VENV)/env-create-tpu.log; \
	test $$xla -eq 0 && test $$tpu -eq 0
	# Two pytest-xdist workers (TEST_WORKERS), then the tests marked `alone` with nothing
	# beside them: their verdicts come from timing the app (tests/conftest.py says more).
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not alone" --durations=30; shared=$$?; \
	$(PY) -m pytest -q -m alone --durations=10; alone=$$?; \
	test $$shared -eq 0 && test $$alone -eq 0

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

# SkyPilot (the sky extra), for the `--on sky:` tests: the task torchport builds
# checked by SkyPilot's own parser, and the path without a cloud (nothing is
# launched).  About 30 s the first time (70 packages, torch untouched); when pip
# cannot install it, those tests skip and say why.
sky: $(STAMP)
	@$(PY) -c 'import sky' 2>/dev/null || $(PY) -m pip install --quiet -e '.[sky]' \
	    || echo "could not install skypilot: the sky tests will skip"

# Debian's openssh-server, for the `evaluate --on ssh://` tests: they start their
# own sshd on a loopback port with throwaway keys (the system's sshd is never
# started or configured).  Installed when missing and the machine allows;
# otherwise those tests skip and say why.  Not where systemd runs: Debian
# would start the package's own sshd on every address.
sshd:
	@if command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; then :; \
	elif [ -d /run/systemd/system ]; then echo "sshd missing: installing openssh-server here would start a system sshd; install it yourself to run the remote tests"; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "sshd missing and no apt-get: the remote tests will skip"; \
	else SUDO=; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	  if [ -n "$$SUDO" ] && ! sudo -n true 2>/dev/null; then echo "sshd missing and not root: the remote tests will skip"; \
	  else ( DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openssh-server >/dev/null 2>&1 \
	      || { $$SUDO apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openssh-server >/dev/null; } ) \
	    || echo "could not install openssh-server: the remote tests will skip"; fi; fi

clean:
	rm -rf $(VENV) torchport-results .pytest_cache .mypy_cache .ruff_cache
