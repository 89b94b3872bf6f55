"""The built-in rubrics follow the shape rules and the briefs' weights."""

from __future__ import annotations

import pytest

from cassettes_app.checks.rules import SHAPES, shape_rules
from reviewer.models import RubricTemplate
from reviewer.review.rubrics import ANCHORS, BUILTIN


@pytest.mark.parametrize("shape", SHAPES)
def test_every_rubric_row_cites_only_checks_that_apply_to_its_shape(shape: str) -> None:
    rules = shape_rules(shape)
    for title, _, _, check_ids in BUILTIN[shape]["rows"]:
        assert check_ids, title
        assert [c for c in check_ids if not rules[c].applies] == [], (shape, title)


def test_the_weights_are_the_briefs() -> None:
    def weights(slug: str) -> list[tuple[str, int]]:
        return [(title, weight) for title, weight, _, _ in BUILTIN[slug]["rows"]]

    assert weights("run-twice") == [
        ("Byte-identical replays", 30),
        ("No network", 20),
        ("Missing fixture fails loudly", 20),
        ("Record is capped and re-runnable", 20),
        ("Volatile data outside the graded file", 10),
    ]
    assert weights("ticket-service") == [
        ("Correctness", 35),
        ("Reproducibility", 25),
        ("Failure handling", 25),
        ("Communication", 15),
    ]
    for spec in BUILTIN.values():
        assert sum(weight for _, weight, _, _ in spec["rows"]) == 100


def test_the_installed_rubrics_are_the_builtin_ones(db) -> None:
    for slug, spec in BUILTIN.items():
        rows = list(RubricTemplate.objects.get(slug=slug).rows.order_by("order"))
        assert [(r.title, r.weight, r.check_ids) for r in rows] == [
            (title, weight, ids) for title, weight, _, ids in spec["rows"]
        ]


def test_every_builtin_row_describes_its_four_levels(db) -> None:
    for slug, spec in BUILTIN.items():
        for row in RubricTemplate.objects.get(slug=slug).rows.all():
            assert len(row.anchors) == 4, (slug, row.title)
            assert all(isinstance(a, str) and a.strip() for a in row.anchors), (slug, row.title)
            assert row.anchors[3].startswith("Reproduced"), (slug, row.title)
        assert {title for title, *_ in spec["rows"]} == set(ANCHORS[slug])
