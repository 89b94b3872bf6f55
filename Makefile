# Cassette Review. `make run` serves the demo; `make test` runs the whole suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export DJANGO_SETTINGS_MODULE := reviewer.settings
SANDBOX_RUNTIME ?= /opt/cassette-review/sandbox-runtime
# The tests' own settings (pyproject's DJANGO_SETTINGS_MODULE), not the exported app ones:
# with reviewer.settings a SQLite test database lives in memory, where the worker processes
# the worker tests start cannot see it ("no such table: submissions_job").
PYTEST := DJANGO_SETTINGS_MODULE=tests.settings $(BIN)/python -m pytest

.PHONY: run setup migrate demo worker serve test test-deps test-fast test-sandbox lint typecheck fmt sandbox-runtime bench bench-deps

run: setup migrate demo
	@scripts/run-dev.sh

setup: $(BIN)/.installed

$(BIN)/.installed: requirements.txt requirements-dev.txt constraints.txt
	@scripts/setup.sh "$(PY)" "$(VENV)"
	@touch $@

migrate: setup
	$(BIN)/python manage.py migrate --noinput

demo: setup migrate
	$(BIN)/python manage.py seed_demo

worker: setup
	$(BIN)/celery -A reviewer worker -B -l info --concurrency 2

serve: setup
	$(BIN)/python manage.py runserver 127.0.0.1:8000

# The whole suite, including the tests that start a real worker and the real sandbox
# (the sandbox needs root once, to create its users and runtime).
test: setup test-deps sandbox-runtime
	$(PYTEST) -n 2 $(PYTEST_ARGS)

test-deps:
	@scripts/test-deps.sh

test-fast: setup
	$(PYTEST) -n 2 -m "not worker and not sandbox and not browser and not index and not scale and not s3" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy reviewer submissions cassettes_app
	$(BIN)/python manage.py makemigrations --check --dry-run

# mypy with django-stubs alone (settings in pyproject.toml); `lint` and CI run it too.
typecheck: setup
	$(BIN)/mypy reviewer submissions cassettes_app

fmt: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Sandbox users (cr-sbx0..7) and the read-only runtime candidates' code runs with.
sandbox-runtime:
	@scripts/sandbox-setup.sh $(SANDBOX_RUNTIME)

test-sandbox: setup sandbox-runtime
	$(PYTEST) -m sandbox $(PYTEST_ARGS)

# Every speed claim against a baseline measured in the same run, as one table; exits non-zero
# when any target is missed. Not part of `make test` (several minutes on a 2-core machine).
bench: setup test-deps sandbox-runtime bench-deps
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

bench-deps: setup
	@scripts/bench-deps.sh $(VENV)
