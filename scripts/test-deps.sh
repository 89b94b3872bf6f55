#!/usr/bin/env bash
# System packages the whole test suite needs: bubblewrap (sandbox) and Debian's chromium
# (browser tests, driven by the playwright Python package, which brings no browser of its own).
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: missing ${need[*]}; run: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || {
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
}
