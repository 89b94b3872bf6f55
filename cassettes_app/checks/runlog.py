"""The run-twice task's run log: where the volatile data (model id, timings) belongs.

The brief keeps the graded file free of volatile data and puts the model id in a separate
log, `out/run.log`. The replay job reads that file as written by its first run and judges
`cassettes.model_metadata` for the run-twice shape from it.
"""

from __future__ import annotations

import json
import re

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.catalog import MODEL_METADATA

RUN_LOG = "out/run.log"

# Model ids as providers name them; the log may be JSON lines, key=value or prose.
_MODEL_ID = re.compile(
    r"\b(?:gpt-[\w.:-]+|o[1-9](?:-[\w.-]+)?|chatgpt-[\w.-]+|claude-[\w.@-]+|gemini-[\w.-]+|"
    r"(?:open-)?mistral-[\w.-]+|mixtral-[\w.-]+|codestral-[\w.-]+|command-[\w.-]+|"
    r"llama-?[\w.:-]+|deepseek-[\w.-]+|qwen[\w.:-]*|grok-[\w.-]+|phi-[\w.-]+)",
    re.IGNORECASE,
)
_MODEL_FIELD = re.compile(r"""["']?model(?:_id|_name)?["']?\s*[:=]\s*["']?([\w./:@-]+)""")


def model_in_run_log(text: str) -> str | None:
    """The first model id the run log names, or None."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict):
                for key in ("model", "model_id", "model_name"):
                    if isinstance(record.get(key), str) and record[key].strip():
                        return record[key].strip()
        if field := _MODEL_FIELD.search(line):
            return field.group(1)
        if named := _MODEL_ID.search(line):
            return named.group(0)
    return None


def cassettes_model_metadata_from_run_log(data: bytes | None, path: str = RUN_LOG) -> CheckOutcome:
    """`cassettes.model_metadata`, run-twice: the run log names the model (a warning if not)."""
    if data is None:
        return CheckOutcome(
            MODEL_METADATA,
            "warn",
            f"the replay wrote no {path}: the model id is recorded nowhere",
            [{"path": path, "message": "not written by run 1"}],
        )
    model = model_in_run_log(data.decode("utf-8", "replace"))
    if model is None:
        return CheckOutcome(
            MODEL_METADATA,
            "warn",
            f"{path} names no model",
            [{"path": path, "message": "no model id found in the run log"}],
        )
    return CheckOutcome(
        MODEL_METADATA,
        "pass",
        f"{path} names the model: {model}",
        [{"path": path, "message": f"model {model}"}],
    )
