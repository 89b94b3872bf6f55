"""Answer each customer message with a label + reply. Usage: python answer.py replay|record"""

import hashlib
import json
import os
import sys
import time
import urllib.request
import uuid
from datetime import datetime

MODEL = "gpt-4o-mini-2024-07-18"
INPUTS = "fixtures/inputs.json"
RECORDINGS = "fixtures/recordings"
DEFAULT = {"label": "question", "reply": "Thanks for reaching out, we will get back to you soon."}


def fixture_path(text):
    return os.path.join(RECORDINGS, hashlib.sha256(text.encode()).hexdigest()[:16] + ".json")


def call_model(text):
    body = {
        "model": MODEL,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Label as billing, bug, feature, praise or question. JSON: label, reply."},
            {"role": "user", "content": text},
        ],
    }
    req = urllib.request.Request(
        "https://api.openai.com/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        data = json.load(r)
    return data["choices"][0]["message"]["content"], data["model"]


def get_answer(text, mode):
    path = fixture_path(text)
    if mode == "record":
        content, model = call_model(text)
        with open(path, "w") as f:
            json.dump({"text": text, "response": content, "model": model,
                       "recorded_at": datetime.utcnow().isoformat() + "Z"}, f, indent=2)
    if not os.path.exists(path):
        return dict(DEFAULT)
    with open(path) as f:
        return json.loads(json.load(f)["response"])


def main(mode):
    with open(INPUTS) as f:
        inputs = json.load(f)
    start = time.time()
    answers = [get_answer(item["text"], mode) for item in inputs]
    labels = {a["label"] for a in answers}
    result = {
        "run_id": str(uuid.uuid4()),
        "generated_at": datetime.now().isoformat(),
        "labels_seen": [label for label in labels],
        "answers": answers,
    }
    os.makedirs("out", exist_ok=True)
    with open("out/answers.json", "w") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
    with open("out/run.log", "a") as f:
        f.write(f"{mode} {len(answers)} answers in {time.time() - start:.3f}s\n")
    print(f"done: {len(answers)} answers")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "replay")
