#!/usr/bin/env bash
# The public read-only demo in one process group, for one small server or container:
# gunicorn (one worker, four threads) + one Celery worker with its beat, on SQLite and the
# filesystem broker under DATA_DIR, DEMO_MODE on (anonymous visitors read, nobody writes).
# The demo cohort is seeded and its jobs run before the page is served.
#
#   scripts/demo-server.sh            # in the image (python on PATH) or a host (.venv)
#   PORT=8080 ALLOWED_HOSTS=demo.example.org scripts/demo-server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then bin=.venv/bin/; else bin=""; fi
export DEMO_MODE=1 DEBUG="${DEBUG:-0}" SECURE_SSL_REDIRECT="${SECURE_SSL_REDIRECT:-0}"
export DATA_DIR="${DATA_DIR:-$HOME/.local/share/cassette-review-demo}"
unset DATABASE_URL REDIS_URL  # the embedded default: SQLite and the filesystem broker
mkdir -p "$DATA_DIR"
if [ -z "${SECRET_KEY:-}" ]; then
  # One key per demo data folder, made once, readable only by this user.
  key="$DATA_DIR/demo-secret-key"
  [ -s "$key" ] || (umask 077 && "${bin}python" -c 'import secrets; print(secrets.token_urlsafe(50))' >"$key")
  SECRET_KEY="$(cat "$key")"
  export SECRET_KEY
fi
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1}"
"${bin}python" manage.py migrate --noinput -v0
"${bin}python" manage.py collectstatic --noinput -v0
"${bin}python" -m submissions.sandbox check || echo "demo: replays will end 'error' without the sandbox"
"${bin}celery" -A reviewer worker -B -l warning --concurrency 1 &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
"${bin}python" manage.py seed_demo >/dev/null
echo "demo: serving http://0.0.0.0:${PORT:-8000}/ (read-only)"
"${bin}gunicorn" reviewer.wsgi:application --bind "0.0.0.0:${PORT:-8000}" --workers 1 \
  --threads 4 --max-requests 2000 --max-requests-jitter 200 --access-logfile - &
web=$!
trap 'kill $web $worker 2>/dev/null; wait $web $worker 2>/dev/null' EXIT INT TERM
wait -n $web $worker
