"""Where a runbook or README is, and the command it gives for a step (start, test,
replay): a heading naming the step and the first command below it, else a line naming the
step beside a command.
"""

from __future__ import annotations

import re

# Words that name each runbook step; headings may use the broader set.
_STEP_WORDS = {
    "start": (("start", "starting", "serve", "launch"), ("start", "run", "running", "serve")),
    "test": (("test", "tests", "testing"), ("test", "tests", "testing")),
    "replay": (("replay", "replaying"), ("replay", "replaying")),
}


HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


CODE_SPAN = re.compile(r"`([^`\n]+)`")


_COMMANDISH = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:make|python[0-9.]*|\./|sh\s|bash\s|uv\s|poetry\s|pytest|"
    r"docker|npm|node|go\s|cargo|uvicorn|gunicorn|flask|curl)"
)


def doc_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, is code) per line: fenced or indented code is code."""
    out = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        code = fenced or line.startswith(("    ", "\t"))
        out.append((number, line, code))
    return out


def _command_in(line: str, code: bool) -> str | None:
    """The command a doc line shows: the line itself in code, else a command-like span."""
    if code:
        command = line.strip().split("  #", 1)[0].split(" # ", 1)[0].strip()
        return command or None
    for span in CODE_SPAN.findall(line):
        if _COMMANDISH.match(span.strip()):
            return span.strip()
    return None


def doc_step(lines: list[tuple[int, str, bool]], step: str) -> tuple[int, str] | None:
    """(line, command) where a runbook shows how to do `step` (start, test, replay)."""
    line_words, heading_words = _STEP_WORDS[step]
    heading_re = re.compile(rf"\b(?:{'|'.join(heading_words)})\b", re.I)
    line_re = re.compile(rf"\b(?:{'|'.join(line_words)})\b", re.I)
    # A heading naming the step, then the first command in its section.
    in_section = False
    for number, line, code in lines:
        heading = None if code else HEADING.match(line)
        if heading:
            in_section = bool(heading_re.search(heading.group(2)))
            continue
        if in_section:
            command = _command_in(line, code)
            if command:
                return number, command
    # Else a bold label naming the step, as a list item or a line (`- **Start:** ...`,
    # `* **start** — ...`): a small heading over its own item, code blocks included.
    hit = _labelled_step(lines, heading_re)
    if hit:
        return hit
    # Else a line naming the step beside a command (`make test  # run the suite`).
    for number, line, code in lines:
        if line_re.search(line):
            command = _command_in(line, code)
            if command:
                return number, command
    return None


_BOLD_LABEL = re.compile(r"^(\s*)(?:(?:[-*+]|\d{1,3}[.)])\s+)?(?:\*\*|__)(.+?)(?:\*\*|__)(.*)$")


_ITEM_START = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")


def _labelled_step(
    lines: list[tuple[int, str, bool]], heading_re: re.Pattern
) -> tuple[int, str] | None:
    """(line, command) under a bold label naming the step: the first command-like span of
    its item (or any span that reads as a command line), else its first code line."""
    for index, (number, line, code) in enumerate(lines):
        label = None if code else _BOLD_LABEL.match(line)
        if not label or not heading_re.search(label.group(2)):
            continue
        body = [(number, label.group(3), False)]
        for later in lines[index + 1 : index + 16]:
            if not later[2] and (
                HEADING.match(later[1])
                or _ITEM_START.match(later[1])
                or _BOLD_LABEL.match(later[1])
            ):
                break
            body.append(later)
        for at, text, is_code in body:
            command = _command_in(text, is_code) or (None if is_code else _loose_span(text))
            if command:
                return at, command
    return None


def _loose_span(text: str) -> str | None:
    """A code span that reads as a command line though it starts with no known program
    (`.venv/bin/uvicorn svc:app`): it holds a space or a path."""
    for span in CODE_SPAN.findall(text):
        if re.search(r"\s|/", span.strip()):
            return span.strip()
    return None


RUNBOOK_NAMES = ("RUNBOOK.md", "RUNBOOK", "RUNBOOK.txt", "RUNBOOK.rst", "OPERATIONS.md")


README_NAMES = ("README.md", "README", "README.rst", "README.txt")
