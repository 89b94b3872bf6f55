#!/usr/bin/env bash
# ./run.sh replay   answer fixtures/inputs.json from fixtures/recordings/ (offline, deterministic)
# ./run.sh record   record inputs that have no recording yet (needs OPENAI_API_KEY), then replay
set -euo pipefail
cd "$(dirname "$0")"
mode="${1:-}"
case "$mode" in
  replay|record) shift ;;
  *) echo "usage: ./run.sh replay|record [--force] [--limit N]" >&2; exit 64 ;;
esac
exec "${PYTHON:-python3}" -m answerer "$mode" "$@"
