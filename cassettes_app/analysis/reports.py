"""What the analyser reports per discovered file."""

from __future__ import annotations

from dataclasses import dataclass

from cassettes_app.parsed import Body, ParseResult
from cassettes_app.response_ids import ResponseIdFound
from cassettes_app.secrets import TextProfile, escapes_hide_literals

DECODED_NOTES = {"base64", "gzip", "x-gzip", "deflate", "br"}

# Formats whose bodies are the file's own JSON strings or a json.dumps of its values, so a
# body holds no literal its file lacks when the file uses no \u or \/ escape (the only
# escapes that can spell a letter, a digit or a slash).
_LITERAL_FORMATS = {"cassette_json", "fixture_json", "agent_log", "trace"}


@dataclass
class FileReport:
    """One discovered recording, trace or ledger file, with everything parsed from it.

    Its bodies keep their bytes only (`data` and what describes it): their decoded text and
    JSON were read by the analyser and dropped.
    """

    path: str  # relative to the root, "/"-separated
    role: str  # "recording" | "trace" | "ledger"
    size: int
    sha256: str
    result: ParseResult
    # `secrets.text_profile` of the file's text when every body parsed from it holds only
    # literals of that text (see `body_profile`); None when that is not known.
    profile: TextProfile | None = None
    turns: int = 0  # conversation turns its recordings add (one per model exchange)
    # Each recording's response ids (`response_ids.response_ids`), in the recordings' order.
    response_ids: tuple[tuple[ResponseIdFound, ...], ...] = ()

    @property
    def secret_free(self) -> bool:
        """True when no secret rule can fire on the file, nor on any body parsed from it."""
        return self.profile is not None and self.profile.empty

    def body_profile(self, body: Body | None = None) -> TextProfile | None:
        """The profile that `secrets.redact_text` may trust for a body of this file.

        None (redact with every rule) for a body decoded from base64 or a compression, whose
        bytes are not in the file.
        """
        if self.profile is None or body is None:
            return self.profile
        notes = set((body.encoding_note or "").split("; "))
        return None if notes & DECODED_NOTES else self.profile


def literal_bodies(result: ParseResult, data: bytes | None) -> bool:
    """True when every body of the parse holds only literals of the file's text.

    The formats in _LITERAL_FORMATS take bodies from JSON strings or json.dumps of JSON
    values; once decoded, only some escapes can add a literal (`escapes_hide_literals`).
    """
    if data is None or result.format not in _LITERAL_FORMATS:
        return False
    return not escapes_hide_literals(data)
