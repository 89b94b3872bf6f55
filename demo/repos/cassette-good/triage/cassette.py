"""Cassette layer at the transport boundary: record, replay or pass through model calls."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol

# Keys that change on every call without changing what we ask the model.
# Dropped from the top level of the payload before hashing (see REPLAY.md).
VOLATILE_KEYS = ("user", "request_id", "id", "created")
MODES = ("record", "replay", "passthrough")


class Transport(Protocol):
    def send(self, payload: dict[str, Any]) -> dict[str, Any]: ...


class CassetteMiss(RuntimeError):
    """Replay was asked for a request that was never recorded."""

    def __init__(self, key: str, path: Path) -> None:
        self.key = key
        self.path = path
        super().__init__(
            f"no cassette for key {key}: expected {path}. "
            "Replay never calls the live endpoint; run `make record` to record it."
        )


class CassetteMismatch(RuntimeError):
    """A cassette exists for the key but its stored request is a different request."""


def canonical(payload: dict[str, Any]) -> str:
    kept = {k: v for k, v in payload.items() if k not in VOLATILE_KEYS}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cassette_key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(payload).encode("utf-8")).hexdigest()[:16]


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class CassetteTransport:
    """Wraps the live transport; one cassette file per request (one turn per file)."""

    def __init__(
        self,
        mode: str,
        directory: Path,
        live: Transport | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"CASSETTE_MODE must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.directory = Path(directory)
        self.live = live
        self.clock = clock
        self.used: list[str] = []

    @classmethod
    def from_env(cls, directory: Path, live: Transport | None) -> CassetteTransport:
        return cls(os.environ.get("CASSETTE_MODE", "replay"), directory, live)

    def path_for(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def send(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.mode == "passthrough":
            return self._live().send(payload)
        key = cassette_key(payload)
        path = self.path_for(key)
        if self.mode == "replay":
            return self._replay(key, path, payload)
        response = self._live().send(payload)
        record = {
            "key": key,
            "request": payload,
            "response": response,
            "recorded_at": self.clock(),
            "model": response.get("model") or payload.get("model"),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        os.replace(tmp, path)
        self.used.append(key)
        return response

    def _replay(self, key: str, path: Path, payload: dict[str, Any]) -> dict[str, Any]:
        # A miss is an error, never a reason to go to the network: a silent live call
        # would make the suite pass on a laptop and fail (or bill) everywhere else.
        if not path.is_file():
            raise CassetteMiss(key, path)
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") != key or canonical(data.get("request", {})) != canonical(payload):
            raise CassetteMismatch(
                f"cassette {path} does not hold the request for key {key}; re-record it"
            )
        self.used.append(key)
        return data["response"]

    def _live(self) -> Transport:
        if self.live is None:
            raise RuntimeError(f"CASSETTE_MODE={self.mode} needs a live transport")
        return self.live
