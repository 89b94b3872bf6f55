"""Rebuild conversations from separately recorded exchanges by message-prefix chaining."""

from __future__ import annotations

import gc
import json
import json.encoder as json_encoder
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cassettes_app.providers import Exchange, Message, ToolCall

__all__ = [
    "KeyedExchange",
    "ParsedTurn",
    "Thread",
    "analyse",
    "build_threads",
    "message_key",
    "multi_turn_blobs",
]


@dataclass(slots=True)
class ParsedTurn:
    """One model call inside a rebuilt conversation."""

    index: int  # depth in the conversation (0 = first call); a fork continues its parent's count
    exchange_ref: Any
    new_messages: list[Message]
    response: Message | None
    model: str | None
    usage: dict
    cut: int = 0  # where new_messages start in the exchange's request
    payload: Any = None  # a KeyedExchange's payload: the caller resolves the messages from it


@dataclass(frozen=True, slots=True)
class KeyedExchange:
    """An exchange reduced to what chaining needs: the message keys, computed by the caller.

    `request_keys` and `reply_key` stand in for `message_key` of the request messages and of
    the response; any form works as long as equal messages get equal keys and the role
    stays first. Its turns carry no messages: `ParsedTurn.cut` and `ParsedTurn.payload` tell
    the caller which of its own copies to show.
    """

    request_keys: tuple[tuple, ...]
    reply_key: tuple | None
    model: str | None = None
    payload: Any = None
    # When the request ends with an assistant prefill: the key of the reply as a later
    # request's history carries it, the prefill and the reply as one message.
    completed_key: tuple | None = None


def prefilled(request: Sequence[Message], response: Message | None) -> Message | None:
    """The reply joined to the request's closing assistant message (a prefill such as "{"
    that the model continues, as Anthropic documents), as the history then holds it; None
    when the request does not end with one."""
    if response is None or not request or request[-1].role != "assistant":
        return None
    head = request[-1].text if isinstance(request[-1].text, str) else str(request[-1].text)
    text = response.text if isinstance(response.text, str) else str(response.text)
    return Message("assistant", head + text, list(response.tool_calls), [])


@dataclass(slots=True)
class Thread:
    """A chain of turns; a fork records where it left its parent thread."""

    turns: list[ParsedTurn]
    root_ref: Any  # exchange_ref of this thread's first turn
    forked_from: tuple[int, int] | None = (
        None  # (thread index in the result, position in its turns)
    )
    fork_ref: Any = None  # exchange_ref of the turn this thread branched from


# --------------------------------------------------------------------------- canonical form

_SEED = hash("cassette-review/threads")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False, default=str
)
# json.dumps rebuilds its C encoder on every call; building it once makes argument keys ~3x cheaper.
_C_MAKE_ENCODER = json_encoder.c_make_encoder  # type: ignore[attr-defined]  # not in typeshed
_C_ENCODE = (
    _C_MAKE_ENCODER(None, str, json_encoder.encode_basestring, None, ":", ",", True, False, True)
    if _C_MAKE_ENCODER is not None
    else None
)


def _args_key(call: ToolCall) -> str:
    """Canonical text of a call's arguments; broken JSON compares by its raw text."""
    args = call.arguments
    if not call.arguments_valid:
        return str(call.arguments_raw if call.arguments_raw is not None else args).strip()
    try:
        if _C_ENCODE is not None and isinstance(args, dict):
            return "".join(_C_ENCODE(args, 0))
        return _ENCODER.encode(args)
    except (TypeError, ValueError, RecursionError):
        return repr(args)


def message_key(message: Message) -> tuple:
    """Return the hashable form used to compare messages across recordings.

    Ids are left out on purpose: candidates often regenerate tool-call ids between calls.
    """
    text = message.text
    text = text.strip() if isinstance(text, str) else str(text).strip()
    calls = message.tool_calls
    results = message.tool_results
    if not calls and not results:
        return (message.role, text, (), ())
    return (
        message.role,
        text,
        tuple([(c.name, _args_key(c)) for c in calls]),
        tuple([str(r.content).strip() for r in results]),
    )


# --------------------------------------------------------------------------- index


@dataclass(slots=True)
class _Node:
    """Per-exchange data for chaining."""

    ref: Any
    exchange: Exchange | KeyedExchange | None
    keys: list[tuple]  # message_key of every request message
    prefix: list[int]  # prefix[k] = rolling hash of keys[:k]
    reply: tuple | None  # message_key of the response


class _Index:
    """Hash tables that find, for a request, the earlier exchanges it continues."""

    def __init__(self, exchanges: Sequence[tuple[Any, Exchange | KeyedExchange | None]]) -> None:
        """Hash every request prefix once; index each exchange by what a successor starts with."""
        self.nodes: list[_Node] = []
        # hash(request + response) -> exchanges; a successor's request starts with exactly that
        self.continued: dict[int, list[int]] = {}
        # hash(request) of exchanges without a recorded response; the reply is unknown
        self.open: dict[int, list[int]] = {}
        # Every recorded reply (see `answered`).
        self.reply_keys: set[tuple] = set()
        for i, (ref, ex) in enumerate(exchanges):
            reply = None
            completed = None
            if isinstance(ex, KeyedExchange):
                keys = list(ex.request_keys)
                reply = ex.reply_key
                completed = ex.completed_key
            else:
                msgs = ex.request_messages if isinstance(ex, Exchange) else []
                keys = [message_key(m) for m in msgs]
                if isinstance(ex, Exchange) and ex.response is not None:
                    reply = message_key(ex.response)
                    joined = prefilled(msgs, ex.response)
                    completed = message_key(joined) if joined is not None else None
            if completed is not None:
                self.reply_keys.add(completed)
            prefix = [_SEED]
            h = _SEED
            for key in keys:
                h = hash((h, key))
                prefix.append(h)
            self.nodes.append(_Node(ref, ex, keys, prefix, reply))
            if not keys:
                continue  # an empty request cannot be the start of anything
            if reply is not None:
                self.continued.setdefault(hash((h, reply)), []).append(i)
                self.reply_keys.add(reply)
            else:
                self.open.setdefault(h, []).append(i)

    def covers(self, i: int, cut: int) -> int | None:
        """Return an exchange whose request + reply equal node i's first `cut` messages."""
        node = self.nodes[i]
        # Beyond the table hash, check the request-prefix hash and the reply itself: a false
        # match would need two 64-bit collisions over randomised string hashes.
        for j in self.continued.get(node.prefix[cut], ()):
            other = self.nodes[j]
            if (
                len(other.keys) == cut - 1
                and other.prefix[-1] == node.prefix[cut - 1]
                and other.reply == node.keys[cut - 1]
            ):
                return j
        if node.keys[cut - 1][0] == "assistant":
            for j in self.open.get(node.prefix[cut - 1], ()):
                other = self.nodes[j]
                if len(other.keys) == cut - 1 and other.keys[-1] == node.keys[cut - 2]:
                    return j
        return None

    def answered(self, i: int, pos: int) -> bool:
        """Whether the assistant message at node i's position `pos` is some recording's
        reply, whatever came before it. An agent that trims what it sends (only its last
        few messages, older tool outputs elided, as SWE-agent does) recorded each turn,
        though no recorded request + reply is a prefix of its later requests."""
        return self.nodes[i].keys[pos] in self.reply_keys

    def parent(self, i: int) -> tuple[int | None, int]:
        """Return (closest earlier exchange that node i continues, where its new messages start)."""
        for cut in range(len(self.nodes[i].keys), 1, -1):
            j = self.covers(i, cut)
            if j is not None:
                return j, cut
        return None, 0


def _as_pairs(exchanges: Iterable[Any]) -> list[tuple[Any, Exchange | KeyedExchange | None]]:
    """Accept (ref, exchange) pairs, tolerating bare exchanges (ref = position)."""
    pairs: list[tuple[Any, Exchange | KeyedExchange | None]] = []
    for pos, item in enumerate(exchanges):
        if isinstance(item, Exchange | KeyedExchange):
            pairs.append((pos, item))
        elif isinstance(item, tuple) and len(item) == 2:
            ex = item[1] if isinstance(item[1], Exchange | KeyedExchange) else None
            pairs.append((item[0], ex))
        else:
            pairs.append((pos, None))
    return pairs


# --------------------------------------------------------------------------- public API


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: indexing allocates ~10^6 acyclic tuples and GC passes cost ~2x."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _link(index: _Index) -> tuple[list[int | None], list[int], list[list[int]]]:
    """Find every exchange's parent, where its new messages start, and each parent's children."""
    n = len(index.nodes)
    parent: list[int | None] = [None] * n
    cut = [0] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        p, c = index.parent(i)
        if p is not None:
            parent[i], cut[i] = p, c
            children[p].append(i)
    return parent, cut, children


def _threads(
    index: _Index, parent: list[int | None], cut: list[int], children: list[list[int]]
) -> list[Thread]:
    """Walk the parent forest into threads: the longest path stays, siblings become forks."""
    nodes = index.nodes
    n = len(nodes)
    # A parent's request is strictly shorter than its child's, so longest-first is a post-order.
    height = [1] * n
    for i in sorted(range(n), key=lambda k: len(nodes[k].keys), reverse=True):
        if children[i]:
            height[i] = 1 + max(height[c] for c in children[i])

    def turn(i: int, depth: int) -> ParsedTurn:
        node = nodes[i]
        ex = node.exchange
        if ex is None:
            return ParsedTurn(depth, node.ref, [], None, None, {})
        if isinstance(ex, KeyedExchange):
            return ParsedTurn(depth, node.ref, [], None, ex.model, {}, cut[i], ex.payload)
        usage = dict(ex.usage) if isinstance(ex.usage, dict) else {}
        return ParsedTurn(
            depth,
            node.ref,
            list(ex.request_messages[cut[i] :]),
            ex.response,
            ex.model,
            usage,
            cut[i],
        )

    threads: list[Thread] = []
    for root in range(n):
        if parent[root] is not None:
            continue
        pending: deque[tuple[int, int, tuple[int, int] | None]] = deque([(root, 0, None)])
        while pending:
            start, depth, forked_from = pending.popleft()
            here = len(threads)
            turns: list[ParsedTurn] = []
            i = start
            while True:
                turns.append(turn(i, depth + len(turns)))
                if not children[i]:
                    break
                kids = sorted(children[i], key=lambda c: (-height[c], c))
                for other in kids[1:]:
                    pending.append((other, depth + len(turns), (here, len(turns) - 1)))
                i = kids[0]
            fork_ref = None
            if forked_from is not None:
                fork_ref = threads[forked_from[0]].turns[forked_from[1]].exchange_ref
            threads.append(Thread(turns, nodes[start].ref, forked_from, fork_ref))
    return threads


def _blobs(index: _Index, parent: list[int | None], min_turns: int) -> list[Any]:
    """Refs of exchanges carrying at least min_turns uncovered earlier assistant turns."""
    nodes = index.nodes
    # Assistant messages in a prefix shared by two distinct conversation roots are a fixed
    # prompt (few-shot examples): written by the candidate, not recorded model turns. The
    # prefix is taken after the leading system messages too: a system prompt that differs
    # per conversation (today's date in it) is followed by the same examples.
    tails: dict[int, tuple[int, list[int]]] = {}  # node -> _after_system, once each

    def after_system(i: int) -> tuple[int, list[int]]:
        if i not in tails:
            tails[i] = _after_system(nodes[i].keys)
        return tails[i]

    shared: dict[int, int] = {}
    seen_requests: set[int] = set()
    for i, node in enumerate(nodes):
        if parent[i] is not None or node.prefix[-1] in seen_requests:
            continue  # identical root requests (retries, duplicates) count once
        seen_requests.add(node.prefix[-1])
        for h in {*node.prefix[1:], *after_system(i)[1]}:
            shared[h] = shared.get(h, 0) + 1

    flagged: list[Any] = []
    for i, node in enumerate(nodes):
        uncovered = 0
        last = len(node.keys) - 1
        for pos, key in enumerate(node.keys):
            if key[0] != "assistant" or shared.get(node.prefix[pos + 1], 0) >= 2:
                continue
            if pos == last:
                continue  # a prefill the model is to continue, not an earlier turn
            start, tail = after_system(i)
            if pos >= start and shared.get(tail[pos - start], 0) >= 2:
                continue
            if index.covers(i, pos + 1) is None and not index.answered(i, pos):
                uncovered += 1
        if uncovered >= min_turns:
            flagged.append(node.ref)
    return flagged


def _after_system(keys: list[tuple]) -> tuple[int, list[int]]:
    """Where a request's messages after its leading system messages start, and the rolling
    hashes of those messages' prefixes (hashes[k]: of keys[start : start + k + 1]), seeded
    apart from the whole-request prefixes."""
    start = 0
    while start < len(keys) and keys[start][0] == "system":
        start += 1
    hashes = []
    h = hash((_SEED, "after system"))
    for key in keys[start:]:
        h = hash((h, key))
        hashes.append(h)
    return start, hashes


def build_threads(exchanges: Iterable[tuple[Any, Exchange | KeyedExchange]]) -> list[Thread]:
    """Chain exchanges into threads by request prefix, whatever order they arrive in."""
    with _gc_paused():
        index = _Index(_as_pairs(exchanges))
        return _threads(index, *_link(index))


def multi_turn_blobs(
    exchanges: Iterable[tuple[Any, Exchange | KeyedExchange]], min_turns: int = 2
) -> list[Any]:
    """Refs whose request holds >= min_turns earlier model turns that no other recording covers."""
    with _gc_paused():
        index = _Index(_as_pairs(exchanges))
        parent, _, _ = _link(index)
        return _blobs(index, parent, min_turns)


def analyse(
    exchanges: Iterable[tuple[Any, Exchange | KeyedExchange]], min_turns: int = 2
) -> tuple[list[Thread], list[Any]]:
    """Return (build_threads(exchanges), multi_turn_blobs(exchanges)) from one shared index."""
    with _gc_paused():
        index = _Index(_as_pairs(exchanges))
        parent, cut, children = _link(index)
        return _threads(index, parent, cut, children), _blobs(index, parent, min_turns)
