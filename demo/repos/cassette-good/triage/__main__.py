"""`python -m triage`: triage data/tickets.json and write out/answers.json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .agent import triage_all
from .cassette import CassetteMiss, CassetteMismatch, CassetteTransport
from .live import OpenAITransport
from .tools import ToolBox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triage")
    parser.add_argument("--tickets", default="data/tickets.json")
    parser.add_argument("--data", default="data")
    parser.add_argument("--cassettes", default="cassettes")
    parser.add_argument("--out", default="out/answers.json")
    args = parser.parse_args(argv)

    tickets = json.loads(Path(args.tickets).read_text(encoding="utf-8"))
    transport = CassetteTransport.from_env(Path(args.cassettes), live=OpenAITransport())
    try:
        answers = triage_all(tickets, transport, ToolBox(Path(args.data)))
    except (CassetteMiss, CassetteMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"answers": answers}, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    print(
        f"{len(answers)} tickets, {len(transport.used)} model turns "
        f"(CASSETTE_MODE={transport.mode}) -> {out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
