# Both targets bootstrap their own environment on a fresh machine: uv (installed with pip when
# missing), then `uv sync` from the lock file, then run.
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")

.PHONY: demo test bootstrap bench clean

bootstrap:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || \
		$(PYTHON) -m pip install --quiet uv || \
		$(PYTHON) -m pip install --quiet --user --break-system-packages uv
	$(UV) sync --locked

demo: bootstrap
	$(UV) run python tests/demo_fake.py

# pytest exits 5 when it collected no test: that is a failure here, like any other non-zero code.
test: bootstrap
	$(UV) run pytest -q

bench: bootstrap
	$(UV) run python benchmarks/client_overhead.py

clean:
	rm -rf .venv .pytest_cache
