"""The one JSON rule: what a body that may be JSON reads as, and when two values are equal."""

from __future__ import annotations

from cassettes_app.jsonvalues import json_equal, json_key, maybe_json


def test_numerically_equal_numbers_are_equal_json() -> None:
    assert json_equal(1, 1.0)
    assert json_equal({"qty": 2}, {"qty": 2.0})
    assert not json_equal(1, 1.5)


def test_a_boolean_never_equals_a_number() -> None:
    assert not json_equal(True, 1)
    assert not json_equal(1, True)
    assert not json_equal(False, 0)
    assert not json_equal(0.0, False)
    assert json_equal(True, True)


def test_nested_lists_and_objects_compare_by_value_not_key_order() -> None:
    a = {"a": [1, {"b": 2.0, "c": [True, None]}], "d": "x"}
    b = {"d": "x", "a": [1.0, {"c": [True, None], "b": 2}]}
    assert json_equal(a, b)
    assert json_equal([1, 2], (1.0, 2))
    assert not json_equal([1, 2], [2, 1])
    assert not json_equal({"a": [1, {"c": [1]}]}, {"a": [1, {"c": [True]}]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 1})


def test_the_index_key_agrees_with_equality() -> None:
    assert json_key({"qty": 1, "sku": "A"}) == json_key({"sku": "A", "qty": 1.0})
    assert json_key([True]) != json_key([1])
    assert json_key({"x": 0.5}) != json_key({"x": 0})


def test_a_body_that_may_be_json() -> None:
    assert maybe_json(b' {"a": 1} ') == {"a": 1}
    assert maybe_json("  ") is None
    assert maybe_json("not json") is None
    assert maybe_json("not json", keep_text=True) == "not json"
    assert maybe_json("{broken", keep_text=True) == "{broken"
    assert maybe_json("true") is True
    assert maybe_json([1]) == [1]
