import json
import os
import urllib.request

API_URL = os.getenv("OPENAI_URL", "https://api.openai.com/v1/chat/completions")


class OpenAIClient:
    """Minimal chat completions client (urllib, no SDK)."""

    def __init__(self, url=API_URL, timeout=30):
        self.url = url
        self.timeout = timeout
        self.last_headers = {}

    def complete(self, payload):
        headers = {
            "Authorization": "Bearer " + os.getenv("OPENAI_API_KEY", ""),
            "Content-Type": "application/json",
        }
        self.last_headers = headers
        body = {k: v for k, v in payload.items() if k != "request_id"}
        req = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read())
