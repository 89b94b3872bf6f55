"""The file viewer: one file of a submission's tree, redacted, line-numbered, the evidence's
line lit, size-capped, keys of JSON and YAML set apart. A GET that only reads: the file comes
from the stored archive (submissions/intake/stored.py), so this host needs no WORK_DIR."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from reviewer.views.access import get_submission_for_user
from submissions.intake.stored import MemberRefused, member_read, stored_commit
from submissions.models import RunFile, Submission
from submissions.redact import redact_text

MAX_BYTES = 1024 * 1024  # shown of one file; the rest is counted
MAX_LINE = 4000  # characters of one line shown

_JSON_KEY = re.compile(r"(&quot;(?:[^&\\]|\\.|&(?!quot;))*?&quot;)(\s*:)")
_YAML_KEY = re.compile(r"^(\s*(?:-\s+)?)([^\s:#&][^:#]*?)(:)(?=\s|$)")
_COMMENT = re.compile(r"^(\s*)(#.*)$")


def _highlight(line: str, kind: str) -> str:
    """One line escaped, its keys (and YAML comments) wrapped in spans."""
    html = escape(line)
    if kind == "json":
        return _JSON_KEY.sub(r'<span class="k">\1</span>\2', html)
    if kind == "yaml":
        comment = _COMMENT.match(html)
        if comment:
            return f'{comment.group(1)}<span class="c">{comment.group(2)}</span>'
        return _YAML_KEY.sub(r'\1<span class="k">\2</span>\3', html)
    return html


def _kind(path: str) -> str:
    lower = path.lower()
    if lower.endswith((".json", ".jsonl", ".ndjson", ".har")):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    return "text"


@login_required
@require_GET
def submission_file(request: HttpRequest, pk: int) -> HttpResponse:
    """One file of the submission, as its evidence lines point at it (?path=…&line=…)."""
    submission = get_submission_for_user(request, pk)
    path = request.GET.get("path", "")
    line_param = request.GET.get("line", "")
    lit = int(line_param) if line_param.isdigit() else None
    context: dict[str, object] = {"submission": submission, "path": path, "lit": lit}
    # ?commit=<full id>: the file at another commit of a git hand-in's stored history (the
    # commits cassettes.provenance names); the judged commit otherwise.
    commit = request.GET.get("commit", "")
    if commit == submission.source_commit:
        commit = ""
    try:
        if commit:
            context["other_commit"] = stored_commit(submission, commit)
        member = member_read(submission, path, limit=MAX_BYTES, commit=commit)
    except MemberRefused as exc:
        if commit:  # a file at another commit is never looked for among run outputs
            context["refused"] = exc.reason
            return render(
                request, "reviewer/file.html", context, status=413 if exc.too_large else 404
            )
        # A path no file can have (a NUL, which PostgreSQL cannot even compare) is not
        # looked up among the kept run outputs either.
        lookup = not exc.too_large and "\x00" not in path
        kept = _run_file(submission, path, request.GET.get("run", "")) if lookup else None
        if kept is None:
            context["refused"] = exc.reason
            # Over the per-file cap: the file is there but will not be read (413, not 404).
            return render(
                request, "reviewer/file.html", context, status=413 if exc.too_large else 404
            )
        return _show_run_file(request, context, kept, lit)
    data, size = member.head, member.size
    context["size"] = size
    context["truncated"] = size > len(data)
    if b"\x00" in data[:8192]:
        context["binary"] = True
        return render(request, "reviewer/file.html", context)
    text = redact_text(data.decode("utf-8", "replace"))
    return _show(request, context, text, path, lit)


def _run_file(submission: Submission, path: str, run: str) -> RunFile | None:
    """The copy a replay run wrote of `path` (run 1 unless `run` names the other), if any."""
    files = submission.run_files.filter(path=path).order_by("run")
    if run.isdigit():
        return files.filter(run=int(run)).first() or files.first()
    return files.first()


def _show_run_file(
    request: HttpRequest, context: dict[str, object], kept: RunFile, lit: int | None
) -> HttpResponse:
    """A file the replay wrote (not in the hand-in): said so, with the other run's copy linked."""
    others = list(
        kept.submission.run_files.filter(path=kept.path)
        .exclude(pk=kept.pk)
        .values_list("run", flat=True)
    )
    context.update(
        {"run_file": kept, "other_runs": others, "size": kept.size, "truncated": kept.truncated}
    )
    if kept.binary:
        context["binary"] = True
        return render(request, "reviewer/file.html", context)
    return _show(request, context, kept.text, kept.path, lit)


def _show(
    request: HttpRequest, context: dict[str, object], text: str, path: str, lit: int | None
) -> HttpResponse:
    """The text, line-numbered and highlighted, the evidence's line lit."""
    kind = _kind(path)
    lines = []
    for number, line in enumerate(text.split("\n"), start=1):
        cut = len(line) > MAX_LINE
        shown = _highlight(line[:MAX_LINE], kind)
        lines.append(
            {
                "n": number,
                "html": mark_safe(shown + ("…" if cut else "")),  # noqa: S308 - escaped above
                "lit": number == lit,
            }
        )
    if lines and lines[-1]["html"] == "" and text.endswith("\n"):
        lines.pop()
    context.update({"lines": lines, "kind": kind})
    return render(request, "reviewer/file.html", context)
