#!/usr/bin/env bash
# Build what the replay sandbox needs on a worker host (run as root):
#   (a) the sandbox runtime: a virtualenv, made from Debian's /usr/bin/python3.11,
#       holding the exact pins of submissions/sandbox/runtime/requirements.txt;
#   (b) the sandbox users cr-sbx0..cr-sbx7 (uids 64000..64007): one per worker slot,
#       no home, no login shell, locked password.
#
# Usage: scripts/sandbox-setup.sh [--users-only | --runtime-only] [RUNTIME_DIR]
#   RUNTIME_DIR defaults to /opt/cassette-review/sandbox-runtime.
#   CR_SANDBOX_UID_BASE (64000) and CR_SANDBOX_SLOTS (8) change the users made.
# Idempotent: users that already exist with the right uid are kept; the runtime is
# rebuilt only when requirements.txt changed (its sha256 is stamped in the venv).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$here/submissions/sandbox/runtime/requirements.txt"
do_users=1
do_runtime=1
case "${1:-}" in
  --users-only) do_runtime=0; shift ;;
  --runtime-only) do_users=0; shift ;;
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
esac
runtime="${1:-/opt/cassette-review/sandbox-runtime}"
uid_base="${CR_SANDBOX_UID_BASE:-64000}"
slots="${CR_SANDBOX_SLOTS:-8}"

if [ "$(id -u)" != 0 ]; then
  echo "sandbox-setup: must run as root (creates users, installs packages)" >&2
  exit 1
fi
umask 022

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# The sandbox itself and the tools the worker execs in place (setpriv, prlimit).
command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
command -v setpriv >/dev/null 2>&1 && command -v prlimit >/dev/null 2>&1 || apt_install util-linux

if [ "$do_users" = 1 ]; then
  for slot in $(seq 0 $((slots - 1))); do
    uid=$((uid_base + slot))
    name="cr-sbx$slot"
    if existing="$(getent passwd "$name")"; then
      if [ "$(echo "$existing" | cut -d: -f3)" != "$uid" ]; then
        echo "sandbox-setup: user $name exists with another uid than $uid" >&2
        exit 1
      fi
      continue
    fi
    if other="$(getent passwd "$uid")"; then
      echo "sandbox-setup: uid $uid is taken by ${other%%:*}" >&2
      exit 1
    fi
    getent group "$name" >/dev/null || groupadd --gid "$uid" "$name"
    # No home, no shell: the uid only ever runs bwrap (setpriv drops to it), so nothing
    # on the host should be owned by it or let it log in.
    useradd --uid "$uid" --gid "$uid" --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin --comment "Cassette Review sandbox slot $slot" "$name"
    echo "sandbox-setup: created $name ($uid)"
  done
fi

if [ "$do_runtime" = 1 ]; then
  # Debian's interpreter, not a pyenv one under /root: the sandbox uids must be able to
  # read it, and the sandbox only sees /usr (read-only) and the runtime itself.
  python=/usr/bin/python3.11
  [ -x "$python" ] || apt_install python3.11
  "$python" -c 'import ensurepip' 2>/dev/null || apt_install python3.11-venv
  stamp="$runtime/.cr-requirements.sha256"
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$runtime/bin/python" ]; then
    echo "sandbox-setup: runtime $runtime is up to date"
  else
    # A venv is not relocatable (shebangs hold its path), so it is built in place;
    # the worker mounts it at this same path inside the sandbox.
    rm -rf "$runtime"
    mkdir -p "$(dirname "$runtime")"
    "$python" -m venv "$runtime"
    # --only-binary: no sdist build backend runs as root on this host.
    "$runtime/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
      --only-binary=:all: --require-virtualenv -r "$requirements"
    "$runtime/bin/pip" check
    echo "$want" >"$stamp"
    echo "sandbox-setup: built runtime $runtime"
  fi
  # Root-owned and read-only for everyone else: the sandbox uids read it, never write it.
  chown -R root:root "$runtime"
  chmod -R u+rwX,go+rX,go-w "$runtime"
  d="$(dirname "$runtime")"
  while [ "$d" != / ]; do chmod o+x "$d"; d="$(dirname "$d")"; done
fi
