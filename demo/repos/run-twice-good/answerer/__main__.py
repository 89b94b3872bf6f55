"""python -m answerer replay|record: see run.sh."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from .fixtures import MissingRecording, StaleRecording, load_recording, recording_path, save_recording, text_sha
from .model import LABELS

RECORD_CAP = 20  # a record run never makes more model calls than this unless --limit says so


def parse_answer(content: str) -> dict:
    data = json.loads(content)
    label = data.get("label")
    return {"label": label if label in LABELS else "question", "reply": str(data.get("reply", "")).strip()}


def replay(inputs: list[dict], recordings: Path, log: list[dict]) -> dict:
    answers = []
    for index, item in enumerate(inputs):
        started = time.perf_counter()
        recording = load_recording(recordings, index, item["text"])
        answers.append({"index": index, "input_sha": text_sha(item["text"]), **parse_answer(recording["response"])})
        # Volatile facts go to the log, never into answers.json.
        log.append(
            {
                "index": index,
                "fixture": str(recording_path(recordings, item["text"])),
                "model": recording["model"],
                "recorded_at": recording["recorded_at"],
                "elapsed_ms": round((time.perf_counter() - started) * 1000, 3),
            }
        )
    return {"answers": answers, "count": len(answers)}


def record(inputs: list[dict], recordings: Path, force: bool, limit: int, log: list[dict]) -> None:
    from .model import ask  # imported here so replay never even loads the network code

    todo = [i for i, item in enumerate(inputs) if force or not recording_path(recordings, item["text"]).is_file()]
    if len(todo) > limit:
        print(f"recording {limit} of {len(todo)} missing inputs (raise --limit for more)", file=sys.stderr)
    for index in todo[:limit]:
        started = time.perf_counter()
        content, model = ask(inputs[index]["text"])
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = save_recording(recordings, inputs[index]["text"], content, model, now)
        log.append({"index": index, "recorded": str(path), "model": model, "elapsed_ms": round((time.perf_counter() - started) * 1000, 3)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run.sh")
    parser.add_argument("mode", choices=["replay", "record"])
    parser.add_argument("--inputs", type=Path, default=Path("fixtures/inputs.json"))
    parser.add_argument("--recordings", type=Path, default=Path("fixtures/recordings"))
    parser.add_argument("--out", type=Path, default=Path("out/answers.json"))
    parser.add_argument("--log", type=Path, default=Path("out/run.log"))
    parser.add_argument("--force", action="store_true", help="record: re-record inputs that have a recording")
    parser.add_argument("--limit", type=int, default=RECORD_CAP, help="record: most model calls in one run")
    args = parser.parse_args(argv)

    inputs = json.loads(args.inputs.read_text(encoding="utf-8"))
    log: list[dict] = [{"event": "start", "mode": args.mode, "at": datetime.now(timezone.utc).isoformat()}]
    started = time.perf_counter()
    try:
        if args.mode == "record":
            record(inputs, args.recordings, args.force, args.limit, log)
        result = replay(inputs, args.recordings, log)
    except (MissingRecording, StaleRecording) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    finally:
        log.append({"event": "end", "elapsed_ms": round((time.perf_counter() - started) * 1000, 3)})
        args.log.parent.mkdir(parents=True, exist_ok=True)
        args.log.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in log), encoding="utf-8")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{result['count']} answers -> {args.out} (log: {args.log})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
