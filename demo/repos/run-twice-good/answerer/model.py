"""Live model call, used only by `./run.sh record`."""

from __future__ import annotations

import json
import os
import urllib.request

MODEL = "gpt-4o-mini-2024-07-18"
LABELS = ("billing", "bug", "feature", "praise", "question")
PROMPT = (
    "Label the customer message with one of: " + ", ".join(LABELS) + ". "
    'Reply with JSON only: {"label": ..., "reply": one short sentence to send back}.'
)


def ask(text: str, timeout: float = 60.0) -> tuple[str, str]:
    """Return (assistant content, model id that answered)."""
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise SystemExit("error: ./run.sh record needs OPENAI_API_KEY")
    url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
    body = {
        "model": MODEL,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": text}],
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = json.load(response)
    return data["choices"][0]["message"]["content"], data["model"]
