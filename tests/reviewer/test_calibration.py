"""The hiring lead's calibration pages: every figure shown against reference values worked
out here from their definitions (Krippendorff 2011 for alpha, checked on his own worked
example; the weighted kappa and offsets by hand), and against `manage.py cohort --format
json`."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta
from io import StringIO
from itertools import count, product
from statistics import mean
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.template.defaultfilters import floatformat
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from reviewer.cohort.agreement import (
    alpha_reason,
    figure_reading,
    most_disagreement,
    offset_reading,
    row_spreads,
)
from reviewer.cohort.cohort import cohort_for
from reviewer.models import Review, RubricTemplate, Score
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Assignment, Candidate, Submission
from tests.conftest import make_zip
from tests.reviewer.test_agreement import PAPER, _kappa_by_hand, _units

# --- reference values, from the definitions -------------------------------------------------


def _alpha_by_hand(units: dict) -> float:
    """Ordinal alpha (Krippendorff 2011): coincidences o_ck over units with m_u >= 2 values,
    delta²_ck = (sum of n_g for g from c to k - (n_c + n_k) / 2)², alpha = 1 - D_o / D_e."""
    paired = [list(scores.values()) for scores in units.values() if len(scores) >= 2]
    values = sorted({v for unit in paired for v in unit})
    o = {(c, k): 0.0 for c, k in product(values, repeat=2)}
    for unit in paired:
        m = len(unit)
        for i, j in product(range(m), repeat=2):
            if i != j:
                o[(unit[i], unit[j])] += 1 / (m - 1)
    n_c = {c: sum(o[(c, k)] for k in values) for c in values}
    n = sum(n_c.values())

    def delta(c: int, k: int) -> float:
        lo, hi = min(c, k), max(c, k)
        return (sum(n_c[g] for g in values if lo <= g <= hi) - (n_c[c] + n_c[k]) / 2) ** 2

    observed = sum(o[(c, k)] * delta(c, k) for c, k in o)
    expected = sum(n_c[c] * n_c[k] * delta(c, k) for c, k in o) / (n - 1)
    return 1 - observed / expected


def test_the_reference_alpha_reproduces_krippendorffs_worked_example() -> None:
    assert _alpha_by_hand(_units(PAPER)) == pytest.approx(0.815, abs=5e-4)


def _offsets_by_hand(units: dict, reviewer: str) -> float:
    return mean(
        s[reviewer] - mean(v for r, v in s.items() if r != reviewer)
        for s in units.values()
        if reviewer in s and len(s) >= 2
    )


def _near(shown: str, reference: float) -> None:
    """A figure shown to 3 decimals is the reference value to within its rounding."""
    assert abs(float(shown) - reference) <= 6e-4, (shown, reference)


# --- seeding --------------------------------------------------------------------------------

_uploads = count()  # every upload's archive differs, so none is taken for a duplicate


def _seed(assignment, plan: dict, rubric: str = "cassette", state: str = "submitted") -> dict:
    """plan: candidate -> {user: [score on rubric row 0, row 1, ...] (None: not scored)}."""
    rows = list(RubricTemplate.objects.get(slug=rubric).rows.all())
    out = {}
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name, by_user in plan.items():
            person, _ = Candidate.objects.get_or_create(name=name)
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": f"{name} {next(_uploads)}"})),
                filename="c.zip",
                candidate=person,
                assignment=assignment,
            ).submission
            for user, values in by_user.items():
                review = Review.objects.create(
                    submission=s, reviewer=user, rubric=rows[0].template, state=state
                )
                Score.objects.bulk_create(
                    [
                        Score(review=review, row=row, value=v, evidence=f"{user} on {name}")
                        for row, v in zip(rows, values, strict=False)
                        if v is not None
                    ]
                )
            out[name] = s
    return out


def _figures(body: str) -> dict[str, str]:
    return dict(re.findall(r'data-figure="([^"]+)">([^<]*)<', body))


def _get(client, name: str, *args, **query) -> str:
    response = client.get(reverse(name, args=args), query)
    assert response.status_code == 200
    return response.content.decode()


# Row 0 and row 1 of the cassette rubric; candidates created out of alphabetical order.
PLAN = {
    "Noor": {"alice": [3, 3], "bob": [2, 3], "dan": [3, None]},
    "Ada": {"alice": [2, 2], "bob": [0, 1], "dan": [1, 3]},
    "Kim": {"alice": [1, 1], "bob": [1, 2], "eve": [2, None]},
    "Bo": {"alice": [3, 0], "bob": [1, 0], "dan": [2, None], "eve": [None, 0]},
    "Cy": {"alice": [0, 3], "bob": [0, 1], "dan": [0, None]},
    "Lee": {"alice": [2, 2], "bob": [3, None]},
}


def _reference_units(plan: dict) -> dict:
    units: dict = {}
    for name, by_user in plan.items():
        for user, values in by_user.items():
            for i, v in enumerate(values):
                if v is not None:
                    units.setdefault((name, i), {})[user] = v
    return units


@pytest.fixture
def seeded(assignment, reviewer, reviewer2, lead):
    users = {
        "alice": reviewer,
        "bob": reviewer2,
        "dan": User.objects.create_user("dan"),
        "eve": User.objects.create_user("eve"),
    }
    plan = {name: {users[u]: v for u, v in by.items()} for name, by in PLAN.items()}
    subs = _seed(assignment, plan)
    rows = list(RubricTemplate.objects.get(slug="cassette").rows.all())
    # A draft counts for nothing: the lead's zeros on Noor would change every figure.
    draft = Review.objects.create(submission=subs["Noor"], reviewer=lead, rubric=rows[0].template)
    Score.objects.bulk_create([Score(review=draft, row=r, value=0) for r in rows])
    return subs, rows


# --- access ---------------------------------------------------------------------------------


def test_only_hiring_leads_open_the_calibration_pages(client, reviewer, assignment) -> None:
    pages = [reverse("calibration", args=[assignment.slug]), reverse("reviewers_calibration")]
    for url in pages:
        assert client.get(url).status_code == 302  # to the login page
    client.force_login(reviewer)
    for url in pages:
        assert client.get(url).status_code == 404


def test_the_pages_answer_get_only_and_an_unknown_assignment_is_404(
    client, lead, assignment
) -> None:
    client.force_login(lead)
    assert client.post(reverse("calibration", args=[assignment.slug])).status_code == 405
    assert client.post(reverse("reviewers_calibration")).status_code == 405
    assert client.get(reverse("calibration", args=["no-such"])).status_code == 404


# --- one assignment -------------------------------------------------------------------------


def test_alpha_kappa_offsets_and_threes_match_values_worked_by_hand(
    client, lead, assignment, seeded
) -> None:
    _, rows = seeded
    units = _reference_units(PLAN)
    client.force_login(lead)
    body = _get(client, "calibration", assignment.slug)
    shown = _figures(body)
    _near(shown["alpha:all"], _alpha_by_hand(units))
    for i in (0, 1):
        _near(
            shown[f"alpha-row:{rows[i].pk}"],
            _alpha_by_hand({u: s for u, s in units.items() if u[1] == i}),
        )
    # Row 0 spreads 1, 2, 1, 2, 0, 1 (Kim with eve's 2); row 1: 0, 2, 1, 0, 2 (Lee unpaired).
    assert shown[f"spread-row:{rows[0].pk}"] == "1.167"
    assert shown[f"spread-row:{rows[1].pk}"] == "1.000"
    assert f"Widest spread: <strong>{escape(rows[0].title)}</strong> (on average 1.167" in body
    # Rows nobody scored: not defined, with why, never 0.
    assert shown[f"alpha-row:{rows[2].pk}"] == "not defined"
    assert "not defined: no submitted scores yet" in body

    for a, b in [("alice", "bob"), ("alice", "dan"), ("bob", "dan")]:
        shared = [u for u, s in units.items() if a in s and b in s]
        assert len(shared) >= 5
        kappa = _kappa_by_hand([units[u][a] for u in shared], [units[u][b] for u in shared])
        _near(shown[f"kappa:{a}|{b}"], kappa)
    # eve shares 2 units with alice and bob and none with dan: named, no kappa.
    assert not any(k.startswith("kappa:") and "eve" in k for k in shown)
    note = body[body.index('class="thin-pairs"') :]
    note = note[: note.index("</p>")]
    assert "alice and eve (2 shared units)" in note
    assert "bob and eve (2 shared units)" in note
    assert "dan and eve (no shared unit)" in note

    # dan: +0.5 (Noor), 0 (Ada), 0 (Bo), 0 (Cy) on row 0, +1.5 (Ada) on row 1 -> 2 / 5.
    assert shown["offset:dan"] == "0.400" and shown["share3:dan"] == "0.400"
    # eve: +1 (Kim), 0 (Bo) -> 0.5; no 3s.
    assert shown["offset:eve"] == "0.500" and shown["share3:eve"] == "0.000"
    for who in ("alice", "bob", "dan", "eve"):
        _near(shown[f"offset:{who}"], _offsets_by_hand(units, who))
        mine = [s[who] for s in units.values() if who in s]
        assert shown[f"units:{who}"] == str(len(mine))
        _near(shown[f"share3:{who}"], mine.count(3) / len(mine))
        assert f"({mine.count(3)} of {len(mine)})" in body
    assert shown["offset:bob"].startswith("-")
    block = body[body.index('data-figure="offset:bob"') :]
    assert block[: block.index("</tr>")].count("harsher than the others") == 1
    block = body[body.index('data-figure="offset:dan"') :]
    assert "more lenient than the others" in block[: block.index("</tr>")]


def test_drafts_are_not_counted(client, lead, assignment, seeded) -> None:
    client.force_login(lead)
    body = _get(client, "calibration", assignment.slug)
    assert "offset:carol" not in body and ">carol<" not in body
    assert "1 review still in progress is not counted" in body
    # Noor row 0 is 3, 2, 3 without the draft: one point apart, not three.
    subs, rows = seeded
    assert _figures(body)[f"apart:{subs['Noor'].pk}:{rows[0].pk}"] == "1"


def test_the_page_shows_exactly_the_cohort_commands_figures(
    client, lead, assignment, seeded
) -> None:
    out = StringIO()
    call_command("cohort", assignment.slug, "--format", "json", stdout=out)
    doc = json.loads(out.getvalue())
    _, rows = seeded
    client.force_login(lead)
    shown = _figures(_get(client, "calibration", assignment.slug))

    def fixed(value) -> str:
        return "not defined" if value is None else floatformat(value, 3)

    assert shown["alpha:all"] == fixed(doc["agreement"]["alpha_ordinal"])
    for row in rows:
        assert shown[f"alpha-row:{row.pk}"] == fixed(doc["agreement"]["rows"][row.title])
    pairs = [k for k in shown if k.startswith("kappa:")]
    assert len(pairs) == len(doc["agreement"]["pairs"]) == 3
    for p in doc["agreement"]["pairs"]:
        assert shown[f"kappa:{p['a']}|{p['b']}"] == fixed(p["weighted_kappa"])
    for r in doc["reviewers"]:
        assert shown[f"units:{r['reviewer']}"] == str(r["n"])
        assert shown[f"offset:{r['reviewer']}"] == fixed(r["mean_offset"])
        assert shown[f"share3:{r['reviewer']}"] == fixed(r["share_of_3"])


def test_the_most_disagreement_list_is_widest_first_then_by_candidate(
    client, lead, assignment, seeded
) -> None:
    subs, rows = seeded
    client.force_login(lead)
    body = _get(client, "calibration", assignment.slug)
    section = body[body.index('id="disagreement"') :]
    listed = re.findall(r'data-figure="apart:(\d+):(\d+)">(\d)<', section)
    names = {str(s.pk): name for name, s in subs.items()}
    index = {str(r.pk): i for i, r in enumerate(rows)}
    got = [(names[sid], index[rid], int(apart)) for sid, rid, apart in listed]
    assert got == [
        ("Ada", 0, 2), ("Ada", 1, 2), ("Bo", 0, 2), ("Cy", 1, 2),
        ("Kim", 0, 1), ("Kim", 1, 1), ("Lee", 0, 1), ("Noor", 0, 1),
    ]  # fmt: skip
    # Each unit: a link to the candidate's rubric, and every reviewer's score and evidence.
    ada = section[section.index(f'href="{subs["Ada"].get_absolute_url()}#rubric"') :]
    ada = ada[: ada.index("</tr>")]
    for who, value in (("alice", 2), ("bob", 0), ("dan", 1)):
        assert f"{who}: <strong>{value}</strong>" in ada
        assert f"{who} on Ada" in ada


def test_the_list_stops_at_twenty_units() -> None:
    units = {(sid, 0): {"a": 0, "b": 1 + sid % 3} for sid in range(25)}
    listed = most_disagreement(units)
    assert len(listed) == 20
    assert [apart for _, apart in listed] == sorted((a for _, a in listed), reverse=True)
    assert listed[0] == ((2, 0), 3)  # widest first; ties by the unit (or the tiebreak)
    assert most_disagreement({(1, 0): {"a": 2, "b": 2}, (2, 0): {"a": 1}}) == []


def test_undefined_figures_say_not_defined_and_why(client, lead, reviewer, reviewer2) -> None:
    same = Assignment.objects.create(slug="same", title="Same", rubric="cassette")
    _seed(same, {f"S{i}": {reviewer: [2], reviewer2: [2]} for i in range(5)})
    alone = Assignment.objects.create(slug="alone", title="Alone", rubric="cassette")
    _seed(alone, {"Solo": {reviewer: [3, 1]}})
    client.force_login(lead)

    body = _get(client, "calibration", "same")
    shown = _figures(body)
    assert shown["alpha:all"] == "not defined"
    assert "no variation: every score on units with two or more reviewers is 2" in body
    assert shown["kappa:alice|bob"] == "not defined"
    assert "both reviewers gave one and the same score on every shared unit" in body
    assert shown["offset:alice"] == "0.000" and "in line with the others" in body
    assert "nan" not in body.lower()

    body = _get(client, "calibration", "alone")
    shown = _figures(body)
    assert shown["alpha:all"] == "not defined"
    assert "not defined: only one reviewer has submitted scores" in body
    assert shown["offset:alice"] == "not defined"
    assert "not defined: shares no unit with another reviewer" in body
    assert "No reviewer pair shares 5 or more units" in body
    assert "No unit has reviewers a point or more apart" in body
    assert "nan" not in body.lower()


def test_hostile_names_and_evidence_are_escaped(client, lead, reviewer, assignment) -> None:
    hostile = User.objects.create_user("<img src=x onerror=alert(2)>")
    subs = _seed(assignment, {"<script>alert(1)</script>": {reviewer: [3], hostile: [0]}})
    Score.objects.filter(review__reviewer=hostile).update(evidence="<b onclick=x()>e</b>")
    Assignment.objects.filter(pk=assignment.pk).update(title="<i>t</i>")
    client.force_login(lead)
    for body in (
        _get(client, "calibration", assignment.slug),
        _get(client, "reviewers_calibration", assignment="<svg onload=x()>"),
    ):
        assert "<script>alert" not in body and "<img src=x" not in body and "<i>t</i>" not in body
        assert "<svg" not in body
    assert escape("<script>alert(1)</script>") in _get(client, "calibration", assignment.slug)
    body = _get(client, "calibration", assignment.slug)
    assert escape("<b onclick=x()>e</b>") in body and "<b onclick" not in body
    (sub,) = subs.values()  # the unit is listed, three points apart, under its escaped name
    section = body[body.index('id="disagreement"') :]
    assert f'href="{sub.get_absolute_url()}#rubric">{escape(next(iter(subs)))}</a>' in section
    body = _get(client, "reviewers_calibration", assignment="<svg onload=x()>")
    assert escape("<svg onload=x()>") in body and "the assignment filter is ignored" in body


# --- across assignments ---------------------------------------------------------------------


@pytest.fixture
def two_shapes(assignment, reviewer, reviewer2):
    """Three candidates in each of two assignments, each too few units for a kappa alone."""
    dan = User.objects.create_user("dan")
    trace = Assignment.objects.create(
        slug="trace-b", title="Trace B", shape=Assignment.Shape.TRACE, rubric="trace"
    )
    # An older submission of A1, with scores that must not count.
    old = _seed(assignment, {"A1": {reviewer: [0], reviewer2: [3]}})["A1"]
    Submission.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(days=1))
    _seed(
        assignment,
        {"A1": {reviewer: [3], reviewer2: [1]}, "A2": {reviewer: [2], reviewer2: [2]},
         "A3": {reviewer: [1], reviewer2: [0]}},
    )  # fmt: skip
    _seed(
        trace,
        {"B1": {reviewer: [3], reviewer2: [3], dan: [1]},
         "B2": {reviewer: [0], reviewer2: [1], dan: [2]},
         "B3": {reviewer: [2], reviewer2: [1]}},
        rubric="trace",
    )  # fmt: skip
    _seed(trace, {"B4": {reviewer: [0], dan: [3]}}, rubric="trace", state="draft")
    return assignment, trace


def test_across_assignments_units_are_pooled(client, lead, two_shapes) -> None:
    cassette, trace = two_shapes
    client.force_login(lead)
    body = _get(client, "reviewers_calibration")
    shown = _figures(body)
    # alice: +2, 0, +1 in A; 3 - 2 = +1, 0 - 1.5, 2 - 1 = +1 in B -> 3.5 / 6.
    assert shown["offset:alice"] == "0.583" and shown["units:alice"] == "6"
    assert shown["share3:alice"] == "0.333"
    # Three shared units in each assignment, six pooled: a kappa only when pooled.
    alice = [3, 2, 1, 3, 0, 2]
    bob = [1, 2, 0, 3, 1, 1]
    _near(shown["kappa:alice|bob"], _kappa_by_hand(alice, bob))
    assert "alice and dan (2 shared units)" in body and "bob and dan (2 shared units)" in body
    # Assignment by assignment: the figures of each assignment's own page.
    for a in (cassette, trace):
        for r in cohort_for(a).calibration:
            key = f"{r['reviewer']}@{a.slug}"
            assert shown[f"units:{key}"] == str(r["n"])
            assert shown[f"offset:{key}"] == floatformat(r["mean_offset"], 3)
            assert shown[f"share3:{key}"] == floatformat(r["share_of_3"], 3)
    assert shown["offset:alice@cassette-triage"] == "1.000"
    assert shown["offset:alice@trace-b"] == "0.167"
    assert "units:dan@cassette-triage" not in shown
    for a in (cassette, trace):
        page = _figures(_get(client, "calibration", a.slug))
        assert "kappa:alice|bob" not in page  # alone, three shared units are too few


def test_the_shape_and_assignment_filters(client, lead, two_shapes) -> None:
    cassette, trace = two_shapes
    client.force_login(lead)
    shown = _figures(_get(client, "reviewers_calibration", shape="trace"))
    assert shown["offset:alice"] == "0.167" and shown["units:alice"] == "3"
    assert "kappa:alice|bob" not in shown
    assert not any(k.endswith("@cassette-triage") for k in shown)
    shown = _figures(_get(client, "reviewers_calibration", assignment=cassette.slug))
    assert shown["offset:alice"] == "1.000" and "units:dan" not in shown
    body = _get(client, "reviewers_calibration", shape="cassette", assignment=trace.slug)
    assert "No assignment matches these filters" in body
    body = _get(client, "reviewers_calibration", shape="bogus")
    assert "There is no assignment shape “bogus”: the shape filter is ignored." in body
    assert _figures(body)["offset:alice"] == "0.583"


def _queries(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return [q["sql"] for q in captured.captured_queries]


def test_queries_stay_flat_and_a_get_never_writes(client, lead, reviewer, reviewer2) -> None:
    def add(n: int) -> None:
        start = Assignment.objects.count()
        for i in range(start, start + n):
            a = Assignment.objects.create(slug=f"a{i}", title=f"A{i}", rubric="cassette")
            _seed(a, {f"C{i}-{j}": {reviewer: [j % 4, 1], reviewer2: [2, 3]} for j in range(2)})

    client.force_login(lead)
    add(2)
    across, one = reverse("reviewers_calibration"), reverse("calibration", args=["a0"])
    few = (_queries(client, across), _queries(client, one))
    add(4)
    _seed(Assignment.objects.get(slug="a0"), {f"More {j}": {reviewer: [1]} for j in range(4)})
    many = (_queries(client, across), _queries(client, one))
    assert [len(q) for q in many] == [len(q) for q in few]
    assert len(few[0]) <= 8  # session, user, role, assignments, submissions, scores
    for sql in many[0] + many[1]:
        assert not sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))


# --- words ----------------------------------------------------------------------------------


def test_the_readings_follow_krippendorffs_guide() -> None:
    # Krippendorff's thresholds, applied to the whole 95 % interval, from 10 units up.
    assert figure_reading(0.9, 0.800, 0.95, 10) == "reliable"
    assert figure_reading(0.9, 0.7999, 0.95, 10).startswith("tentative")
    assert figure_reading(0.7, 0.667, 0.75, 10).startswith("tentative")
    assert figure_reading(0.6, 0.5, 0.6669, 10) == "not reliable"
    assert figure_reading(-0.2, -0.4, -0.1, 10).startswith("not reliable: reviewers disagree")
    assert figure_reading(0.9, 0.5, 0.99, 10).startswith("too few units to read: the interval")
    assert figure_reading(1.0, 1.0, 1.0, 9).startswith("too few units to read (9 of the 10")
    assert figure_reading(None, None, None, 0) == "not defined"
    assert offset_reading(-0.1) == "harsher than the others"
    assert offset_reading(0.1) == "more lenient than the others"
    assert alpha_reason({(1, 0): {"a": 1}, (2, 0): {"b": 2}}) == (
        "no unit was scored by two or more reviewers"
    )
    assert alpha_reason({(1, 0): {"a": 1, "b": 2}}) is None


def test_row_spreads_count_only_units_with_two_reviewers() -> None:
    units = {(1, 7): {"a": 0, "b": 3}, (2, 7): {"a": 1, "b": 2}, (3, 7): {"a": 2}}
    assert row_spreads(units) == {
        7: {"units": 3, "paired": 2, "mean_spread": 2, "apart": 2, "flagged": 1}
    }


# --- recommendations ------------------------------------------------------------------------


def test_each_reviewers_recommendations_and_their_agreement_match_the_cohort_json(
    client, lead, assignment, seeded
) -> None:
    subs, _ = seeded
    given = {
        ("Noor", "alice"): "strong_yes",
        ("Noor", "bob"): "yes",
        ("Ada", "alice"): "yes",
        ("Ada", "bob"): "strong_no",
        ("Kim", "alice"): "no",
        ("Kim", "bob"): "no",
        ("Cy", "dan"): "no",
    }
    for (name, who), value in given.items():
        Review.objects.filter(submission=subs[name], reviewer__username=who).update(
            recommendation=value
        )
    out = StringIO()
    call_command("cohort", assignment.slug, "--format", "json", stdout=out)
    doc = json.loads(out.getvalue())
    client.force_login(lead)
    body = _get(client, "calibration", assignment.slug)
    shown = _figures(body)
    labels = {"strong_no": "Strong no", "no": "No", "yes": "Yes", "strong_yes": "Strong yes"}
    for who in ("alice", "bob", "dan", "eve"):
        mine = [
            r["recommendation"]
            for c in doc["candidates"]
            for r in c["reviews"]
            if r["reviewer"] == who
        ]
        for value, label in labels.items():
            assert shown[f"rec:{who}:{label}"] == str(mine.count(value))
        assert shown[f"rec:{who}:none"] == str(mine.count(None))
    assert shown["rec:alice:Yes"] == "1" and shown["rec:bob:No"] == "1"
    assert "rec:carol:none" not in shown  # a draft counts for nothing
    readings = [c["recommendation_agreement"] for c in doc["candidates"]]
    assert sorted(r for r in readings if r in ("agree", "same side", "split")) == [
        "agree",
        "same side",
        "split",
    ]
    assert (
        "Of 3 candidates with two or more recommendations, the reviewers agree on 1, "
        "lean the same way on 1 (yes and strong yes, or no and strong no) and split "
        "between yes and no on 1."
    ) in body
    assert ">Ada</a>: 1 yes · 1 strong no</li>" in body
    across = _figures(_get(client, "reviewers_calibration"))
    assert {k: v for k, v in across.items() if k.startswith("rec:")} == {
        k: v for k, v in shown.items() if k.startswith("rec:")
    }
