#!/usr/bin/env bash
# Serve the dashboard on 127.0.0.1:8000 with a Celery worker (and its beat) beside it.
# The worker uses Redis when REDIS_URL is set, else the filesystem broker under DATA_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
scripts/sandbox-ensure.sh  # the sandbox first, so the demo's replays run for real
"$bin/celery" -A reviewer worker -B -l warning --concurrency 2 &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
echo
echo "Cassette Review: http://127.0.0.1:8000/  (Ctrl-C stops the server and the worker)"
"$bin/python" manage.py seed_demo 2>/dev/null | sed 's/^/  /'
echo
"$bin/python" manage.py runserver --noreload 127.0.0.1:8000
