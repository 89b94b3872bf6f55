#!/usr/bin/env bash
# Before the demo's jobs run (`make run`): the sandbox is set up here when root (as on a
# fresh server), otherwise the one command to run is said once. Exits 0 either way: the
# static checks need no sandbox, and the page banner keeps saying it until it is there.
set -uo pipefail
cd "$(dirname "$0")/.."
runtime="${SANDBOX_RUNTIME:-/opt/cassette-review/sandbox-runtime}"
setup="${CR_SANDBOX_SETUP:-scripts/sandbox-setup.sh}"
if .venv/bin/python -m submissions.sandbox check "$runtime" >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  echo "Setting up the sandbox (users cr-sbx0..7, runtime $runtime)..."
  "$setup" "$runtime" || echo "sandbox setup failed (above); replays will end 'error' until it works"
else
  echo
  echo "The sandbox is not set up: replay, trace re-drive and service probe jobs will end"
  echo "'error' until it is. The static checks (recordings, traces, ledgers, docs) are"
  echo "complete without it. Set it up once with:  sudo make sandbox-runtime"
  echo "then use 'Run again' on a submission's page (or manage.py rerun ID)."
fi
exit 0
