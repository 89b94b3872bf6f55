"""Hardened JSON, JSON Lines and YAML loading for untrusted recordings."""

from __future__ import annotations

import codecs
import functools
import gc
import json
import math
from collections.abc import Iterator
from itertools import compress
from typing import Any

import yaml

from cassettes_app.formats.base import (
    DEFAULT_LIMITS,
    PARSE_ERRORS,
    LoadError,
    ParseLimits,
    error_line,
    error_message,
    finding_from_error,
)

__all__ = [
    "PARSE_ERRORS",
    "LoadError",
    "decode_utf8",
    "error_line",
    "error_message",
    "finding_from_error",
    "iter_jsonl",
    "load_json",
    "load_yaml",
]

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - libyaml is in the venv
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


# --- text --------------------------------------------------------------------


def decode_utf8(data: bytes | bytearray | str) -> str:
    """Decode UTF-8 (BOM stripped); refuse UTF-16/32 and invalid bytes with a clear error."""
    if isinstance(data, str):
        return data[1:] if data.startswith("\ufeff") else data
    raw = bytes(data)
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[3:]
    elif raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise LoadError("file is UTF-32 encoded (byte-order mark found); expected UTF-8", 1)
    elif raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise LoadError("file is UTF-16 encoded (byte-order mark found); expected UTF-8", 1)
    elif raw[:1] == b"\x00" or raw[1:2] == b"\x00":
        raise LoadError("file looks UTF-16 encoded (NUL bytes); expected UTF-8", 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise LoadError(f"invalid UTF-8 at byte {exc.start}", line) from None


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
def _decoder(max_int_digits: int) -> json.JSONDecoder:
    """One strict decoder per digit limit (hooks built once, not per call)."""

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
        parse_int=parse_int,
        parse_float=parse_float,
    )


def load_json(data: bytes | bytearray | str, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Parse JSON strictly: no NaN/Infinity, no duplicate keys, bounded depth and integers."""
    text = decode_utf8(data)
    # The decoder builds only acyclic containers: cyclic GC passes over them are pure cost
    # (a third of the time for a document of many small objects).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            obj = _decoder(limits.max_int_digits).decode(text)
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


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_STD_PREFIX) :] if tag.startswith(_STD_PREFIX) else tag


class _CassetteLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader plus the few benign python tags legacy vcrpy cassettes carry."""


def _construct_python_str(loader: _CassetteLoader, node: yaml.Node) -> str:
    return loader.construct_scalar(node)


def _construct_python_tuple(loader: _CassetteLoader, node: yaml.Node) -> list[Any]:
    # Kept as a list so downstream code sees plain JSON-like values.
    return list(loader.construct_sequence(node, deep=True))


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
        return list(loader.construct_sequence(node, deep=True))
    mapping = loader.construct_mapping(node, deep=True)
    args = mapping.get("args") or [[]]
    first = args[0] if isinstance(args, list | tuple) and args else []
    return list(first) if isinstance(first, list | tuple | bytes | str) else []


_ALLOWED_PYTHON_TAGS = {
    _PY_PREFIX + "str": _construct_python_str,
    _PY_PREFIX + "unicode": _construct_python_str,
    _PY_PREFIX + "tuple": _construct_python_tuple,
    _PY_PREFIX + "object/new:_io.BytesIO": _construct_bytesio,
    _PY_PREFIX + "object/apply:builtins.iter": _construct_iter,
}
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


def load_yaml(data: bytes | bytearray | str, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Load one YAML document safely, with alias, node and depth budgets checked first."""
    text = decode_utf8(data)
    loader = _CassetteLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise LoadError(f"too deeply nested (over {limits.max_depth} levels)") from None
        except yaml.YAMLError as exc:
            raise LoadError(error_message(exc), error_line(exc)) from None
        if node is None:
            return None
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
    finally:
        loader.dispose()


def _tag_of(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", "") or ""
    start = problem.find("'")
    end = problem.rfind("'")
    return problem[start + 1 : end] if 0 <= start < end else ""
