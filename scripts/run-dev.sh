#!/usr/bin/env bash
# Serve the dashboard on 127.0.0.1:8000 with a Celery worker (and its beat) beside it.
# The worker uses Redis when REDIS_URL is set, else the filesystem broker under DATA_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
runtime="${SANDBOX_RUNTIME:-/opt/cassette-review/sandbox-runtime}"
# The sandbox first, so the demo's replays, re-drives and probes run for real: set up here
# when root (as on a fresh server); otherwise said once, here and in the page banner.
if ! "$bin/python" -m submissions.sandbox check "$runtime" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "Setting up the sandbox (users cr-sbx0..7, runtime $runtime)..."
    scripts/sandbox-setup.sh "$runtime"
  else
    echo
    echo "The sandbox is not set up: replay, trace re-drive and service probe jobs will end"
    echo "'error' until it is. The static checks (recordings, traces, ledgers, docs) are"
    echo "complete without it. Set it up once with:  sudo make sandbox-runtime"
    echo "then use 'Run again' on a submission's page (or manage.py rerun ID)."
  fi
fi
"$bin/celery" -A reviewer worker -B -l warning --concurrency 2 &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
echo
echo "Cassette Review: http://127.0.0.1:8000/  (Ctrl-C stops the server and the worker)"
"$bin/python" manage.py seed_demo 2>/dev/null | sed 's/^/  /'
echo
"$bin/python" manage.py runserver --noreload 127.0.0.1:8000
