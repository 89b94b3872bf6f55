"""Parse a generated corpus of VCR.py YAML cassettes, against vcrpy's own cassette loading.

The corpus is written by vcrpy's own serializer (real `vcr.request.Request` objects and
response dicts through `vcr.serialize.serialize`), so every file is exactly what vcrpy
records: `interactions` of request/response mappings, header lists, plain-text JSON bodies,
gzip-encoded bodies as YAML `!!binary`, a few event streams and a few large bodies.

Baseline, in the same run on the same files: vcrpy's `FilesystemPersister.load_cassette`
with its YAML serializer (a safe loader, libyaml's CSafeLoader, builds Request objects).
Ours: read the bytes and `cassettes_app.formats.parse_file`, as the analysis calls it
(sniff, safe YAML load with its node/alias/depth caps, decode every body). Best of
`--repeat` runs per side, alternating. Target: ours <= 1.0x vcrpy's time, and the same
number of interactions found.

    .venv/bin/python bench/bench_vcr.py [--files 300] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vcr.persisters.filesystem import FilesystemPersister  # noqa: E402
from vcr.request import Request  # noqa: E402
from vcr.serialize import serialize  # noqa: E402
from vcr.serializers import yamlserializer  # noqa: E402

from bench.common import Row, emit  # noqa: E402
from cassettes_app.formats import parse_file  # noqa: E402

URL = "https://api.openai.com/v1/chat/completions"
MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-08-06", "gpt-4.1-mini-2025-04-14")
T = TypeVar("T")
# The conversation history a request carries is capped, as agents trim their context.
HISTORY_TURNS = 4


class Corpus:
    """Deterministic random text and OpenAI-shaped payloads for one corpus."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = [f"w{i}" for i in range(3000)] + ["the", "a", "file", "test", "é", "→"]

    def text(self, words: int) -> str:
        return " ".join(self.rng.choices(self.words, k=words))

    def completion(self, model: str, content: str, number: int) -> dict:
        tool_calls = None
        if self.rng.random() < 0.3:
            arguments = json.dumps({"path": f"src/m{number}.py", "content": self.text(40)})
            tool_calls = [
                {
                    "id": f"call_{number:08x}",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": arguments},
                }
            ]
        message = {"role": "assistant", "content": content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": f"chatcmpl-{self.rng.getrandbits(64):016x}",
            "object": "chat.completion",
            "created": 1_720_000_000 + number,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": self.rng.randint(100, 9000),
                "completion_tokens": self.rng.randint(10, 900),
                "total_tokens": self.rng.randint(200, 9900),
            },
            "system_fingerprint": "fp_" + f"{self.rng.getrandbits(40):010x}",
        }

    def stream(self, model: str, content: str, number: int) -> str:
        """The same answer as chat.completion.chunk server-sent events."""
        chunk_id = f"chatcmpl-{self.rng.getrandbits(64):016x}"
        events = []
        pieces = content.split(" ")
        for i in range(0, len(pieces), 3):
            delta = {"content": " ".join(pieces[i : i + 3]) + " "}
            if i == 0:
                delta["role"] = "assistant"
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": 1_720_000_000 + number,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            events.append("data: " + json.dumps(chunk) + "\n\n")
        events.append("data: [DONE]\n\n")
        return "".join(events)

    def response_headers(self, content_type: str, encoding: str | None) -> dict:
        headers = {
            "Date": ["Tue, 09 Jul 2024 10:00:00 GMT"],
            "Content-Type": [content_type],
            "Transfer-Encoding": ["chunked"],
            "Connection": ["keep-alive"],
            "openai-organization": ["user-abc123"],
            "openai-processing-ms": [str(self.rng.randint(200, 9000))],
            "openai-version": ["2020-10-01"],
            "x-ratelimit-limit-requests": ["10000"],
            "x-ratelimit-remaining-requests": [str(self.rng.randint(0, 9999))],
            "x-ratelimit-reset-requests": ["6ms"],
            "x-request-id": [f"req_{self.rng.getrandbits(128):032x}"],
            "CF-RAY": [f"{self.rng.getrandbits(64):016x}-AMS"],
            "Server": ["cloudflare"],
        }
        if encoding:
            headers["Content-Encoding"] = [encoding]
        return headers

    def cassette(self, number: int) -> tuple[list[Request], list[dict]]:
        """One agent session: a growing conversation, one interaction per model call."""
        model = self.rng.choice(MODELS)
        streaming = self.rng.random() < 0.1
        history = [{"role": "system", "content": self.text(60)}]
        requests, responses = [], []
        for turn in range(self.rng.randint(5, 40)):
            big = self.rng.random() < 0.03  # a large tool result or file dump
            history.append({"role": "user", "content": self.text(4000 if big else 40)})
            body = {
                "model": model,
                "messages": history[:1] + history[1:][-2 * HISTORY_TURNS :],
                "temperature": 0,
                "stream": streaming,
            }
            request_headers = {
                "Content-Type": "application/json",
                "Authorization": "<REDACTED>",
                "User-Agent": "OpenAI/Python 1.35.3",
                "Accept-Encoding": "gzip, deflate",
            }
            requests.append(Request("POST", URL, json.dumps(body), request_headers))
            answer = self.text(self.rng.randint(20, 3000 if big else 300))
            history.append({"role": "assistant", "content": answer})
            responses.append(self.response(model, answer, number * 100 + turn, streaming))
        return requests, responses

    def response(self, model: str, answer: str, number: int, streaming: bool) -> dict:
        if streaming:
            content_type, payload = "text/event-stream", self.stream(model, answer, number)
        else:
            content_type = "application/json"
            payload = json.dumps(self.completion(model, answer, number))
        encoding = "gzip" if self.rng.random() < 0.4 else None
        data = payload.encode("utf-8")
        if encoding:
            data = gzip.compress(data, compresslevel=6, mtime=0)
        return {
            "status": {"code": 200, "message": "OK"},
            "headers": self.response_headers(content_type, encoding),
            "body": {"string": data},
        }


def generate(folder: Path, files: int, seed: int = 11) -> tuple[list[Path], int, int]:
    """Write the corpus with vcrpy's serializer; return (paths, interactions, bytes)."""
    corpus = Corpus(seed)
    paths, interactions, size = [], 0, 0
    for number in range(files):
        requests, responses = corpus.cassette(number)
        text = serialize({"requests": requests, "responses": responses}, yamlserializer)
        path = folder / f"session_{number:04d}.yaml"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
        interactions += len(requests)
        size += path.stat().st_size
    return paths, interactions, size


def load_with_vcrpy(paths: list[Path]) -> int:
    """vcrpy's own loading of every cassette; the interactions it found."""
    found = 0
    for path in paths:
        requests, _responses = FilesystemPersister.load_cassette(path, yamlserializer)
        found += len(requests)
    return found


def load_with_ours(paths: list[Path], root: Path) -> tuple[int, int]:
    """Our parser on every cassette, as the analysis calls it; (interactions, findings)."""
    found = findings = 0
    for path in paths:
        data = path.read_bytes()
        result = parse_file(str(path.relative_to(root)), data, format_hint=None)
        found += sum(len(r.interactions) for r in result.recordings)
        findings += len(result.findings)
    return found, findings


def timed(work: Callable[..., T], *args: Any) -> tuple[float, T]:
    """(seconds, result) of one call; collected first, so no side pays for the other's garbage."""
    gc.collect()
    started = time.perf_counter()
    result = work(*args)
    return time.perf_counter() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the corpus here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_vcr_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        paths, written, size = generate(root, args.files)
        ours_times, base_times = [], []
        for _ in range(args.repeat):
            seconds, base_found = timed(load_with_vcrpy, paths)
            base_times.append(seconds)
            seconds, (ours_found, findings) = timed(load_with_ours, paths, root)
            ours_times.append(seconds)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    ours, base = min(ours_times), min(base_times)
    ratio = ours / base
    same = ours_found == base_found == written
    return emit(
        Row(
            what=(
                f"VCR YAML cassettes, {len(paths)} files, {written} interactions, "
                f"{size / 1e6:.0f} MB"
            ),
            ours=f"{ours:.2f} s, {ours_found} interactions, {findings} findings",
            baseline=f"vcrpy {base:.2f} s, {base_found} interactions",
            ratio=f"{ratio:.2f}x",
            target="<= 1.0x vcrpy's time, same interactions",
            ok=ratio <= 1.0 and same,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
