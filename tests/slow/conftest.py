"""Fixtures of the slow tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _builtin_rubrics(request: pytest.FixtureRequest) -> None:
    """The built-in rubrics, for a test against a live server.

    A migration installs them, but a transactional test's database flush removes them:
    a live-server test that ran after another one found "This assignment names no rubric"
    (no rubric rows to score) depending on the order the tests ran in."""
    if "live_server" not in request.fixturenames:
        return
    request.getfixturevalue("transactional_db")
    from reviewer.models import RubricRow, RubricTemplate
    from reviewer.review.rubrics import install_builtin_rubrics

    install_builtin_rubrics(RubricTemplate, RubricRow)
