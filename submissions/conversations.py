"""Conversations of two submissions on the same request: each conversation's identity (its
first user message, else its recording key), and the pairing of one submission's
conversations with another's. The per-turn diff page and the lead's pairwise view read it."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from submissions.models import Submission, Turn

# Pairing by the closest wording compares every unpaired conversation of A with every one of
# B; past this many comparisons only identical first messages pair (each costs a word split).
FUZZY_COMPARISONS = 10_000


def _identity_of(turn: Turn) -> tuple[str, str]:
    """(how, identity) of a conversation from its first turn: its first user message
    (whitespace folded: two candidates' agents on the same ticket send the same one, while
    their recording keys differ with every setting), else the recording's key, else none."""
    for message in turn.new_messages or []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = " ".join(str(message.get("text") or "").split())
            if text:
                return "first user message", text[:2000]
    if turn.recording_id and turn.recording and turn.recording.key:
        return "recording key", turn.recording.key
    return "", ""


def thread_index(submission: Submission) -> list[dict]:
    """Each conversation's thread number, identity and a label (its first user message)."""
    firsts = submission.turns.filter(index=0).select_related("recording").order_by("thread")
    out = []
    for turn in firsts[:2000]:
        how, identity = _identity_of(turn)
        if how == "first user message":
            label = identity
        else:
            label = turn.recording.path if how and turn.recording else ""
        out.append({"thread": turn.thread, "how": how, "identity": identity, "label": label[:80]})
    return out


_WORDS = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# Two first messages this alike (shared words over all words) are the same request worded
# by two candidates' prompts: "Ticket T-1001 (customer C-118): Checkout…" and
# "Ticket T-1001 from customer C-118 Subject: Checkout…".
SAME_REQUEST = 0.5


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()[:2000]))


def pair_thread(ours: list[dict], theirs: list[dict], thread: int) -> tuple[int | None, str]:
    """Their conversation on the same request as our `thread`: the same identity, else the
    clearly closest first user message; never the same number by default."""
    mine = next((t for t in ours if t["thread"] == thread), None)
    if mine is None or not mine["identity"]:
        return None, ""
    for other in theirs:
        if (other["how"], other["identity"]) == (mine["how"], mine["identity"]):
            return other["thread"], mine["how"]
    if mine["how"] != "first user message":
        return None, mine["how"]
    words = _words(mine["identity"])
    scored = []
    for other in theirs:
        if other["how"] == "first user message":
            theirs_words = _words(other["identity"])
            union = words | theirs_words
            scored.append((len(words & theirs_words) / len(union) if union else 0.0, other))
    scored.sort(key=lambda pair: -pair[0])
    if (
        scored
        and scored[0][0] >= SAME_REQUEST
        and (len(scored) == 1 or scored[1][0] < scored[0][0])
    ):
        share = round(scored[0][0] * 100)
        return scored[0][1]["thread"], f"closest first user message ({share}% of its words)"
    return None, mine["how"]


def pair_conversations(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]]
) -> tuple[list[tuple[dict, dict, str]], list[dict], list[dict], bool]:
    """Conversations of A and B on the same request: (pairs, only in A, only in B, whether
    the closest-wording pass was skipped for size). One partner each, identical first
    messages (or recording keys) first, then the per-turn diff page's closest-wording rule."""
    waiting: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for other in theirs:
        if other["identity"]:
            waiting[(other["how"], other["identity"])].append(other)
    matched: dict[int, tuple[dict, str]] = {}
    used: set[int] = set()
    for mine in ours:
        same = waiting.get((mine["how"], mine["identity"])) if mine["identity"] else None
        if same:
            other = same.pop(0)
            matched[mine["thread"]] = (other, f"the same {mine['how']}")
            used.add(other["thread"])
    leftover = [m for m in ours if m["thread"] not in matched and m["identity"]]
    free = [t for t in theirs if t["thread"] not in used]
    skipped = bool(leftover and free) and len(leftover) * len(free) > FUZZY_COMPARISONS
    if not skipped:
        for mine in leftover:
            thread, how = pair_thread([mine], free, mine["thread"])
            if thread is None:
                continue
            other = next(t for t in free if t["thread"] == thread)
            free.remove(other)
            used.add(thread)
            matched[mine["thread"]] = (
                other,
                f"the {how}" if "closest" in how else f"the same {how}",
            )
    pairs = [(m, *matched[m["thread"]]) for m in ours if m["thread"] in matched]
    only_a = [m for m in ours if m["thread"] not in matched]
    only_b = [t for t in theirs if t["thread"] not in used]
    return pairs, only_a, only_b, skipped
