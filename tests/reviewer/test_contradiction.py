"""A score that contradicts its linked checks, in both directions, and never on nothing."""

from __future__ import annotations

import pytest

from reviewer.review.contradiction import contradiction

HYGIENE = ["cassettes.no_secrets", "cassettes.keys_match", "cassettes.pruned"]


@pytest.mark.parametrize("value", [2, 3])
def test_a_high_score_beside_a_failed_check_contradicts_it(value) -> None:
    statuses = {"cassettes.no_secrets": "fail", "cassettes.keys_match": "pass"}
    found = contradiction(value, HYGIENE, statuses)
    assert found is not None and found.failed
    assert found.check_ids == ("cassettes.no_secrets",)
    assert found.text == f"contradicts its checks: {value} while cassettes.no_secrets failed"


@pytest.mark.parametrize("value", [0, 1])
def test_a_low_score_beside_all_passed_checks_contradicts_them(value) -> None:
    statuses = dict.fromkeys(HYGIENE, "pass")
    found = contradiction(value, HYGIENE, statuses)
    assert found is not None and not found.failed
    assert found.check_ids == tuple(HYGIENE)
    assert found.as_json() == {"value": value, "checks": HYGIENE, "failed": False}
    assert found.text == f"contradicts its checks: {value} while {', '.join(HYGIENE)} all passed"


def test_agreeing_scores_are_not_marked() -> None:
    assert contradiction(0, HYGIENE, {"cassettes.no_secrets": "fail"}) is None
    assert contradiction(3, HYGIENE, dict.fromkeys(HYGIENE, "pass")) is None
    assert contradiction(2, HYGIENE, {"cassettes.no_secrets": "warn"}) is None
    assert contradiction(None, HYGIENE, {"cassettes.no_secrets": "fail"}) is None


@pytest.mark.parametrize("other", ["skip", "error", "warn", None])
def test_a_low_score_is_not_marked_when_a_check_observed_nothing(other) -> None:
    statuses = dict.fromkeys(HYGIENE, "pass")
    if other is None:
        del statuses["cassettes.pruned"]  # not run yet
    else:
        statuses["cassettes.pruned"] = other
    assert contradiction(1, HYGIENE, statuses) is None


def test_nothing_observed_means_no_marker() -> None:
    assert contradiction(0, HYGIENE, {}) is None  # no check ran
    assert contradiction(0, [], {}) is None  # the row links no check
    assert contradiction(3, HYGIENE, {}) is None


def test_checks_that_do_not_apply_to_the_shape_are_left_out() -> None:
    statuses = {"cassettes.no_secrets": "pass", "cassettes.keys_match": "fail"}
    skipped = frozenset({"cassettes.keys_match", "cassettes.pruned"})
    assert contradiction(3, HYGIENE, statuses, not_applying=skipped) is None
    low = contradiction(0, HYGIENE, statuses, not_applying=skipped)
    assert low is not None and low.check_ids == ("cassettes.no_secrets",)
    # Only checks that do not apply: nothing was observed.
    assert contradiction(0, ["cassettes.pruned"], {}, not_applying=skipped) is None
