import json
import os
import sys

from .bot import Tools, load, triage_all
from .cassettes import Cassettes


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out/answers.json"
    answers = triage_all(load("data/tickets.json"), Cassettes(), Tools())
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"answers": answers}, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(answers)} answers to {out}")


main()
