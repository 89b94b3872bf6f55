#!/usr/bin/env bash
# What `make bench` needs beyond `make test`: the baselines' Python packages and wrk (the load
# tool the page benchmark drives gunicorn with).
set -euo pipefail
venv="${1:-.venv}"
"$venv/bin/pip" install -q -r requirements-bench.txt -c constraints.txt 2>/dev/null \
  || "$venv/bin/pip" install -q -r requirements-bench.txt
command -v wrk >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "bench-deps: missing wrk; run: sudo apt-get install wrk" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq wrk >/dev/null; }
