"""Hardened JSON, JSON Lines and YAML loading for untrusted recordings."""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import gc
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from itertools import compress
from typing import Any, cast

import yaml

from cassettes_app.limits import (
    DEFAULT_LIMITS,
    PARSE_ERRORS,
    LoadError,
    ParseLimits,
    error_line,
    error_message,
)

__all__ = [
    "PARSE_ERRORS",
    "LoadError",
    "decode_utf8",
    "error_line",
    "error_message",
    "int_at",
    "iter_jsonl",
    "load_json",
    "load_yaml",
    "object_at",
]

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - libyaml is in the venv
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]  # same API, pure Python


# --- text --------------------------------------------------------------------


def decode_utf8(data: bytes | bytearray | str) -> str:
    """Decode UTF-8 (BOM stripped); refuse UTF-16/32 and invalid bytes with a clear error."""
    if isinstance(data, str):
        return data[1:] if data.startswith("\ufeff") else data
    raw = _without_bom(bytes(data))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise LoadError(f"invalid UTF-8 at byte {exc.start}", line) from None


def object_at(parent: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`parent[key]` when it is an object, else an empty one: a recording may hold anything,
    a string or a list included, where its format expects an object. (The loaders make every
    object a dict, and the dict check is the cheap one: stream folds call this per event.)"""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def int_at(parent: Mapping[str, Any], key: str, default: int) -> int:
    """`parent[key]` when it is an int, else `default`."""
    value = parent.get(key)
    return value if isinstance(value, int) else default


def _without_bom(raw: bytes) -> bytes:
    """Drop a UTF-8 byte-order mark; refuse a file that is UTF-16 or UTF-32."""
    if raw.startswith(codecs.BOM_UTF8):
        return raw[3:]
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise LoadError("file is UTF-32 encoded (byte-order mark found); expected UTF-8", 1)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise LoadError("file is UTF-16 encoded (byte-order mark found); expected UTF-8", 1)
    if raw[:1] == b"\x00" or raw[1:2] == b"\x00":
        raise LoadError("file looks UTF-16 encoded (NUL bytes); expected UTF-8", 1)
    return raw


# --- JSON --------------------------------------------------------------------


_CONTAINERS = frozenset({dict, list})
_WALK_ALWAYS = 128 * 1024  # characters of JSON text above which the depth walk always runs


def _check_depth(obj: Any, max_depth: int) -> None:
    """Refuse nesting beyond max_depth, walking the containers one level at a time.

    The containers of a level are picked out at C speed (map, compress): the Python loop
    runs once per container, never once per value.
    """
    is_container = _CONTAINERS.__contains__
    level = [obj] if isinstance(obj, dict | list) else []
    depth = 1
    while level:
        if depth > max_depth:
            raise LoadError(f"too deeply nested (over {max_depth} levels)")
        below: list[Any] = []
        for item in level:
            values = list(item.values()) if type(item) is dict else item
            below.extend(compress(values, map(is_container, map(type, values))))
        level = below
        depth += 1


@functools.lru_cache(maxsize=16)
def _decoder(max_int_digits: int, check_ints: bool = True) -> json.JSONDecoder:
    """One strict decoder per digit limit (hooks built once, not per call).

    Without `check_ints` integers are left to int(), for when its own digit limit is ours.
    """

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise LoadError(f"duplicate key {key!r}")
                seen.add(key)
        return result

    def reject_constant(name: str) -> Any:
        raise LoadError(f"{name} is not valid JSON")

    def parse_int(digits: str) -> int:
        count = len(digits) - (digits[0] == "-")
        if count > max_int_digits:
            raise LoadError(f"integer of {count} digits is over max_int_digits ({max_int_digits})")
        return int(digits)

    def parse_float(number: str) -> float:
        if len(number) > max_int_digits:
            raise LoadError(f"number of {len(number)} characters is over max_int_digits")
        value = float(number)
        if math.isinf(value):
            raise LoadError(f"number {number[:40]} is out of range")
        return value

    return json.JSONDecoder(
        object_pairs_hook=pairs_hook,
        parse_constant=reject_constant,
        parse_int=parse_int if check_ints else None,
        parse_float=parse_float,
    )


_WHITESPACE = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]  # not in typeshed


def _decode(decoder: json.JSONDecoder, text: str) -> Any:
    """`decoder.decode(text)` without its two Python frames: bodies and events are many."""
    start = _WHITESPACE(text, 0).end()
    try:
        obj, end = decoder.scan_once(text, start)  # type: ignore[attr-defined]  # set in __init__
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    if end != len(text):
        end = _WHITESPACE(text, end).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    return obj


def _strict_decode(text: str, max_int_digits: int) -> Any:
    """Decode with the strict decoder, sparing the Python call per integer when possible."""
    if max_int_digits == sys.get_int_max_str_digits():
        # int() refuses the same integers our hook does, with a plain ValueError; the hooked
        # decoder then runs again only to word the error as before.
        try:
            return _decode(_decoder(max_int_digits, False), text)
        except (LoadError, json.JSONDecodeError):
            raise
        except ValueError:
            pass
    return _decode(_decoder(max_int_digits), text)


def load_json(data: bytes | bytearray | str, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Parse JSON strictly: no NaN/Infinity, no duplicate keys, bounded depth and integers."""
    text = decode_utf8(data)
    # The decoder builds only acyclic containers: cyclic GC passes over them are pure cost
    # (a third of the time for a document of many small objects).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            obj = _strict_decode(text, limits.max_int_digits)
        except LoadError:
            raise
        except json.JSONDecodeError as exc:
            raise LoadError(f"invalid JSON: {exc.msg}", exc.lineno) from None
        except RecursionError:
            raise LoadError(f"too deeply nested (over {limits.max_depth} levels)") from None
        except ValueError as exc:
            raise LoadError(f"invalid JSON: {exc}") from None
        # Depth never exceeds the count of opening brackets, so short documents skip the walk.
        # A long text is walked at once: the walk costs per container, which is less than two
        # counts over every character unless the containers are many (then it walks anyway).
        if len(text) > _WALK_ALWAYS or text.count("[") + text.count("{") > limits.max_depth:
            _check_depth(obj, limits.max_depth)
    finally:
        if was_enabled:
            gc.enable()
    return obj


def json_loader(limits: ParseLimits = DEFAULT_LIMITS) -> Callable[[str], Any]:
    """`load_json` for many small texts (stream events): the same results, set up once.

    A text the scanner reads whole, with too few brackets to need the depth walk, is done
    in one C call; anything else (whitespace around it, an error, a long text) goes to
    `load_json` itself, so its results and messages are the only ones.
    """
    int_limit_is_ours = limits.max_int_digits == sys.get_int_max_str_digits()
    decoder = _decoder(limits.max_int_digits, not int_limit_is_ours)
    scan = decoder.scan_once  # type: ignore[attr-defined]  # JSONDecoder sets it in __init__
    max_depth = limits.max_depth

    def load(text: str) -> Any:
        try:
            obj, end = scan(text, 0)
        except LoadError:
            raise  # a duplicate key or a bad number: the same error load_json raises
        except (StopIteration, ValueError, RecursionError):
            return load_json(text, limits)
        if (
            end == len(text)
            and end <= _WALK_ALWAYS
            and text.count("[") + text.count("{") <= max_depth
        ):
            return obj
        return load_json(text, limits)

    return load


def iter_jsonl(
    data: bytes, limits: ParseLimits = DEFAULT_LIMITS
) -> Iterator[tuple[int, Any, str | None]]:
    """Yield (line number, object, None) per good line and (line, None, reason) per bad one."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    start = 0
    lineno = 0
    count = 0
    size = len(data)
    while start < size:
        lineno += 1
        # memchr-speed scan: an oversized line is skipped without being decoded.
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        length = end - start
        if length > limits.max_line_bytes:
            yield (
                lineno,
                None,
                f"line is {length} bytes, over max_line_bytes ({limits.max_line_bytes})",
            )
        else:
            line = data[start:end].strip()
            if line:
                count += 1
                if count > limits.max_events:
                    yield lineno, None, f"stopped after {limits.max_events} lines (max_events)"
                    return
                try:
                    yield lineno, load_json(line, limits), None
                except LoadError as exc:
                    yield lineno, None, exc.message
        start = end + 1


# --- YAML --------------------------------------------------------------------

_PY_PREFIX = "tag:yaml.org,2002:python/"
_STD_PREFIX = "tag:yaml.org,2002:"
_STR = _STD_PREFIX + "str"
_SEQ = _STD_PREFIX + "seq"
_MAP = _STD_PREFIX + "map"
# Scalar tags whose safe constructors read one node and nothing else.
_PLAIN_SCALARS = frozenset(
    _STD_PREFIX + name for name in ("null", "bool", "int", "float", "binary", "timestamp")
)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_STD_PREFIX) :] if tag.startswith(_STD_PREFIX) else tag


class _CassetteLoader(_BaseLoader):
    """Safe loader plus the few benign python tags legacy vcrpy cassettes carry.

    libyaml's composer calls back into Python to resolve the tag of every node. With no
    path resolvers a collection's tag is fixed and a quoted scalar is always a string, and
    a plain scalar's tag depends on its text alone; so `resolve` answers those at once.
    """

    def resolve(self, kind: Any, value: str, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.MappingNode:
            return _MAP
        if kind is yaml.SequenceNode:
            return _SEQ
        if not implicit[0]:
            return _STR  # quoted, or tagged with the non-specific `!`
        # A plain scalar's tag depends on its text alone: keys and header values recur.
        tag = _RESOLVED.get(value)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(value) <= 64 and len(_RESOLVED) < 4096:
                _RESOLVED[value] = tag
        return tag


_RESOLVED: dict[str, str] = {}


# The shortcuts in `resolve` are only right while no path resolver is registered.
assert not _CassetteLoader.yaml_path_resolvers


# The constructors below get whatever node carries their tag; PyYAML's construct_scalar,
# construct_sequence and construct_mapping check the node's kind themselves and raise
# ConstructorError (a parse error) on another, hence the casts.


def _construct_python_str(loader: _CassetteLoader, node: yaml.Node) -> str:
    return loader.construct_scalar(cast(yaml.ScalarNode, node))


def _construct_python_tuple(loader: _CassetteLoader, node: yaml.Node) -> list[Any]:
    # Kept as a list so downstream code sees plain JSON-like values.
    return list(loader.construct_sequence(cast(yaml.SequenceNode, node), deep=True))


def _construct_bytesio(loader: _CassetteLoader, node: yaml.Node) -> bytes:
    # Old cassettes pickled file-like bodies as BytesIO(state=(buffer, pos, dict)); keep the buffer.
    if not isinstance(node, yaml.MappingNode):
        return b""
    mapping = loader.construct_mapping(node, deep=True)
    state = mapping.get("state") or (b"",)
    data = state[0] if isinstance(state, list | tuple) and state else b""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return data if isinstance(data, bytes) else b""


def _construct_iter(loader: _CassetteLoader, node: yaml.Node) -> list[Any]:
    # Iterator bodies were stored as apply:builtins.iter with args=[sequence]; never call iter().
    if not isinstance(node, yaml.MappingNode):
        return list(loader.construct_sequence(cast(yaml.SequenceNode, node), deep=True))
    mapping = loader.construct_mapping(node, deep=True)
    args = mapping.get("args") or [[]]
    first = args[0] if isinstance(args, list | tuple) and args else []
    return list(first) if isinstance(first, list | tuple | bytes | str) else []


def _construct_istr(loader: _CassetteLoader, node: yaml.Node) -> str:
    # aiohttp's header keys: multidict's case-insensitive str, stored as apply:istr [text].
    # Never applied; the text it wraps is all there is to it.
    if isinstance(node, yaml.SequenceNode):
        items = loader.construct_sequence(node, deep=True)
        return str(items[0]) if items and isinstance(items[0], str) else ""
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    assert isinstance(node, yaml.MappingNode)  # the composer makes only these three kinds
    mapping = loader.construct_mapping(node, deep=True)
    args = mapping.get("args") or [""]
    return str(args[0]) if isinstance(args, list | tuple) and args else ""


def _construct_ruby_binary(loader: _CassetteLoader, node: yaml.Node) -> bytes:
    # Ruby's Psych writes ASCII-8BIT strings as `!binary` (base64), as PyYAML's `!!binary`.
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(
            None, None, "!binary must be a base64 scalar", node.start_mark
        )
    try:
        return base64.b64decode("".join(loader.construct_scalar(node).split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"!binary is not base64: {exc}", node.start_mark
        ) from None


_ALLOWED_PYTHON_TAGS = {
    _PY_PREFIX + "str": _construct_python_str,
    _PY_PREFIX + "unicode": _construct_python_str,
    _PY_PREFIX + "tuple": _construct_python_tuple,
    _PY_PREFIX + "object/new:_io.BytesIO": _construct_bytesio,
    _PY_PREFIX + "object/apply:builtins.iter": _construct_iter,
    _PY_PREFIX + "object/apply:multidict._multidict.istr": _construct_istr,
    _PY_PREFIX + "object/apply:multidict._multidict_py.istr": _construct_istr,
    _PY_PREFIX + "object/new:multidict._multidict.istr": _construct_istr,
}
# Ruby VCR (Psych): its one tag for bytes. Other `!ruby/...` tags stay refused.
_CassetteLoader.add_constructor("!binary", _construct_ruby_binary)
for _tag, _constructor in _ALLOWED_PYTHON_TAGS.items():
    _CassetteLoader.add_constructor(_tag, _constructor)


def _node_line(node: yaml.Node) -> int | None:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def _check_graph(root: yaml.Node, limits: ParseLimits) -> None:
    """Vet the composed node graph before anything is constructed.

    PyYAML shares aliased nodes, so a billion-laughs file composes instantly; the
    blow-up only comes when something walks the expanded tree. Sizes are memoised
    per node, so this costs one pass over the distinct nodes.
    """
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done
    sizes: dict[int, int] = {}
    aliases = 0
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, leaving = stack.pop()
        node_id = id(node)
        if leaving:
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > limits.max_yaml_nodes:
                raise LoadError(
                    f"YAML expands to over {limits.max_yaml_nodes} nodes (max_yaml_nodes)",
                    _node_line(node),
                )
            sizes[node_id] = size
            state[node_id] = 2
            continue
        seen = state.get(node_id)
        if seen == 2:
            aliases += 1
            if aliases > limits.max_yaml_aliases:
                raise LoadError(
                    f"YAML uses over {limits.max_yaml_aliases} aliases (max_yaml_aliases)",
                    _node_line(node),
                )
            continue
        if seen == 1:
            raise LoadError("recursive YAML alias", _node_line(node))
        if depth > limits.max_depth:
            raise LoadError(f"too deeply nested (over {limits.max_depth} levels)", _node_line(node))
        tag = node.tag or ""
        if tag.startswith(_PY_PREFIX) and tag not in _ALLOWED_PYTHON_TAGS:
            raise LoadError(f"unsafe YAML tag {_short_tag(tag)}", _node_line(node))
        state[node_id] = 1
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


class _NotPlainTree(Exception):
    """The document is not a plain tree of common tags: take the general, checked path."""


def _build_plain_tree(loader: _CassetteLoader, root: yaml.Node, limits: ParseLimits) -> Any:
    """Construct a document in one walk, if it is a plain tree; else raise _NotPlainTree.

    A plain tree has no aliases (every node is met once) and only str/seq/map and simple
    scalar tags, no merge keys, no python tags. For such a tree the expanded node count is
    the node count, the alias count is zero and the depth is the walk's depth, so checking
    them on the way is the whole of `_check_graph`, and the values are those
    `construct_document` builds. Anything else, a budget overrun included, is left to
    `_check_graph` + `construct_document`, so their verdicts and messages stay the only ones.
    """
    seen: set[int] = set()
    constructors = loader.yaml_constructors
    max_depth = limits.max_depth
    max_nodes = limits.max_yaml_nodes
    scalar_node, sequence_node, mapping_node = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode

    def scalar(node: yaml.Node) -> Any:
        key = id(node)
        if key in seen:
            raise _NotPlainTree
        seen.add(key)
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag in _PLAIN_SCALARS:
            return constructors[tag](loader, node)
        raise _NotPlainTree

    def build(node: yaml.Node, depth: int) -> Any:
        """The value of a collection at `depth` (checked by the caller)."""
        key = id(node)
        if key in seen:
            raise _NotPlainTree
        seen.add(key)
        items = node.value
        if items and depth >= max_depth:  # its children would be too deep
            raise _NotPlainTree
        if len(seen) + 2 * len(items) > max_nodes:
            raise _NotPlainTree
        depth += 1
        kind = type(node)
        if kind is sequence_node and node.tag == _SEQ:
            return [
                scalar(child) if type(child) is scalar_node else build(child, depth)
                for child in items
            ]
        if kind is not mapping_node or node.tag != _MAP:
            raise _NotPlainTree
        mapping: dict[Any, Any] = {}
        for key_node, value_node in items:
            # Scalar keys only (always hashable); merge `<<` and value `=` keys need flattening
            # (their tags are not plain, so scalar() refuses them).
            if type(key_node) is not scalar_node:
                raise _NotPlainTree
            mapping[scalar(key_node)] = (
                scalar(value_node) if type(value_node) is scalar_node else build(value_node, depth)
            )
        return mapping

    if max_depth < 1:
        raise _NotPlainTree
    try:
        document = scalar(root) if type(root) is scalar_node else build(root, 1)
    except Exception:  # whatever failed, the general path gives the verdict
        raise _NotPlainTree from None
    if len(seen) > max_nodes:
        raise _NotPlainTree
    return document


def _composed(
    data: bytes | bytearray | str, source: bytes | str
) -> tuple[_CassetteLoader, yaml.Node | None]:
    """Compose the one document of `source`; the caller disposes of the loader.

    Bytes that fail to compose are composed again as decoded text, so that the error is the
    one text always gave: invalid UTF-8 as decode_utf8 words it, a reader error naming a
    string, not bytes.
    """
    loader = _CassetteLoader(source)
    try:
        return loader, loader.get_single_node()
    except (RecursionError, yaml.YAMLError):
        loader.dispose()
        if isinstance(source, str):
            raise
    loader = _CassetteLoader(decode_utf8(data))
    try:
        return loader, loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise


def load_yaml(data: bytes | bytearray | str, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Load one YAML document safely, with alias, node and depth budgets checked first."""
    # libyaml checks UTF-8 as strictly as Python's decoder, so it reads the bytes themselves,
    # the very bytes the decoded text would encode to: decoding here, for the parser to
    # encode again, only copied the file twice.
    source = decode_utf8(data) if isinstance(data, str) else _without_bom(bytes(data))
    # Composing and constructing allocate a node and a value per scalar and link them into
    # trees: cyclic GC passes over them are pure cost (a fifth of the load). A recursive
    # alias does make a cycle; it is collected once GC is back on.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            loader, node = _composed(data, source)
        except RecursionError:
            raise LoadError(f"too deeply nested (over {limits.max_depth} levels)") from None
        except yaml.YAMLError as exc:
            raise LoadError(error_message(exc), error_line(exc)) from None
        try:
            return _construct(loader, node, limits)
        finally:
            loader.dispose()
    finally:
        if was_enabled:
            gc.enable()


def _construct(loader: _CassetteLoader, node: yaml.Node | None, limits: ParseLimits) -> Any:
    """The document's value: a plain tree in one walk, anything else checked, then built."""
    if node is None:
        return None
    try:
        return _build_plain_tree(loader, node, limits)
    except _NotPlainTree:
        pass
    _check_graph(node, limits)
    try:
        return loader.construct_document(node)
    except yaml.constructor.ConstructorError as exc:
        line = error_line(exc)
        if "could not determine a constructor" in str(exc):
            tag = _short_tag(_tag_of(exc))
            raise LoadError(f"unsupported YAML tag {tag}".strip(), line) from None
        raise LoadError(error_message(exc), line) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # e.g. an impossible timestamp such as 2024-13-45
        raise LoadError(f"invalid YAML value: {exc}") from None


def _tag_of(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", "") or ""
    start = problem.find("'")
    end = problem.rfind("'")
    return problem[start + 1 : end] if 0 <= start < end else ""
