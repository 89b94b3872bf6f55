#!/usr/bin/env bash
set -e
cd "$(dirname "$0")"
python3 answer.py "${1:-replay}"
