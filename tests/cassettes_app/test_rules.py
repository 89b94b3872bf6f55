"""Which checks apply to each take-home shape, and the `checks:` overrides."""

from __future__ import annotations

import pytest

from cassettes_app.checks import catalog as c
from cassettes_app.checks.rules import SHAPES, RuleError, shape_rules, validate_overrides


def test_every_shape_has_a_rule_for_every_catalog_check() -> None:
    for shape in SHAPES:
        rules = shape_rules(shape)
        assert set(rules) == set(c.CATALOG)
        for cid, rule in rules.items():
            assert rule.means if rule.applies else rule.reason, (shape, cid)


@pytest.mark.parametrize(
    ("shape", "cid"),
    [
        ("run-twice", c.PER_TURN),
        ("run-twice", c.REPLAY_NOTES),
        ("run-twice", c.LIVE_MATCH),
        ("run-twice", c.LEDGER_CONSISTENT),
        ("cassette", c.LEDGER_CONSISTENT),
        ("cassette", c.SERVICE_STARTS),
        ("ticket-service", c.MISSING_FIXTURE),
        ("ticket-service", c.TOOL_CALLS_REACH_STUB),
    ],
)
def test_checks_the_brief_does_not_ask_for_do_not_apply(shape: str, cid: str) -> None:
    assert not shape_rules(shape)[cid].applies


def test_what_pass_means_follows_the_shape() -> None:
    assert "out/run.log" in shape_rules("run-twice")[c.MODEL_METADATA].means
    assert "./run.sh replay" in shape_rules("run-twice")[c.ENTRYPOINTS].means
    assert "make demo" in shape_rules("cassette")[c.ENTRYPOINTS].means
    assert "degrade" in shape_rules("ticket-service")[c.MISSING_FIXTURE].reason


def test_an_assignment_can_turn_a_check_off_or_on_with_a_reason() -> None:
    overrides = validate_overrides(
        {
            c.MODEL_METADATA: {"applies": False, "reason": "we grade the model elsewhere"},
            c.LEDGER_CONSISTENT: {"applies": True},
        }
    )
    rules = shape_rules("cassette", overrides)
    assert not rules[c.MODEL_METADATA].applies
    assert rules[c.MODEL_METADATA].reason == "we grade the model elsewhere"
    assert rules[c.LEDGER_CONSISTENT].applies and rules[c.LEDGER_CONSISTENT].means
    off = shape_rules("cassette", validate_overrides({c.FRESH: {"applies": False}}))
    assert off[c.FRESH].reason == "the assignment turns it off"


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("all", "checks:"),
        ({"replay.everything": {"applies": False}}, "checks.replay.everything"),
        ({c.FRESH: False}, f"checks.{c.FRESH}:"),
        ({c.FRESH: {"applies": "no"}}, f"checks.{c.FRESH}.applies"),
        ({c.FRESH: {"apply": False}}, f"checks.{c.FRESH}.apply"),
        ({c.FRESH: {"reason": ""}}, f"checks.{c.FRESH}.reason"),
    ],
)
def test_a_bad_override_names_its_key(value: object, names: str) -> None:
    with pytest.raises(RuleError) as info:
        validate_overrides(value)
    assert str(info.value).startswith(names)


def test_the_readme_table_is_the_rules() -> None:
    from tests.paths import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in readme.splitlines():
        if line.startswith("| `") and line.count("|") == len(SHAPES) + 2:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = [cell == "yes" for cell in cells[1:]]
    expected = {cid: [shape_rules(shape)[cid].applies for shape in SHAPES] for cid in c.CATALOG}
    assert rows == expected
