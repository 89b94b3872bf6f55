"""The real model call: an OpenAI-style chat completions POST (record and passthrough only)."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAITransport:
    def __init__(self, base_url: str | None = None, timeout: float = 60.0) -> None:
        base = base_url or os.environ.get("OPENAI_BASE_URL", DEFAULT_BASE_URL)
        self.url = base.rstrip("/") + "/chat/completions"
        self.timeout = timeout

    def send(self, payload: dict[str, Any]) -> dict[str, Any]:
        api_key = os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise RuntimeError("OPENAI_API_KEY is not set (only record/passthrough need it)")
        body = dict(payload)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        # request_id is ours, not an API parameter: it travels as a header instead.
        request_id = body.pop("request_id", None)
        if request_id:
            headers["X-Client-Request-Id"] = str(request_id)
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.load(response)
