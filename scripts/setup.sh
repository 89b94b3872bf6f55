#!/usr/bin/env bash
# Create the virtualenv and install the pinned dependencies. Usage: setup.sh PYTHON VENV
set -euo pipefail
py=${1:-python3.11}
venv=${2:-.venv}
command -v "$py" >/dev/null 2>&1 || py=python3
if ! "$py" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
  echo "setup: Python 3.11 is required ($py is $("$py" --version 2>&1))." >&2
  exit 1
fi
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  # Debian ships venv's pip bootstrap separately.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing python3-venv (Debian keeps ensurepip apart)" >&2
    apt-get install -y -qq python3-venv >/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null; }
  else
    echo "setup: Python's venv module is missing; run: sudo apt-get install python3-venv" >&2
    exit 1
  fi
fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade "pip>=24"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
