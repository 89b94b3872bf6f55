"""The hiring lead's pairwise view: checks by id, rubric rows, conversations by request."""

from __future__ import annotations

import io
import re
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reviewer.cohort.pairwise import MAX_THREADS, MAX_TURNS
from reviewer.models import Review, RubricTemplate, Score
from submissions.conversations import pair_conversations
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Assignment, Candidate, CheckResult, Recording, Submission, Turn
from tests.conftest import make_zip


def _submission(assignment, name: str, content: str = "") -> Submission:
    candidate, _ = Candidate.objects.get_or_create(name=name)
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(make_zip({"n": content or name})),
            filename="c.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission


def _review(submission, reviewer, value: int, *, state="submitted", evidence="") -> Review:
    rubric = RubricTemplate.objects.get(slug="cassette")
    review = Review.objects.create(
        submission=submission, reviewer=reviewer, rubric=rubric, state=state
    )
    Score.objects.bulk_create(
        [Score(review=review, row=row, value=value, evidence=evidence) for row in rubric.rows.all()]
    )
    return review


def _conversation(submission, thread: int, turns: list[tuple[str, str]], path: str) -> None:
    recording = Recording.objects.create(
        submission=submission, path=path, format="cassette_json", key=f"k-{path}"
    )
    Turn.objects.bulk_create(
        [
            Turn(
                submission=submission,
                thread=thread,
                index=i,
                recording=recording,
                new_messages=[{"role": "user", "text": user, "tool_calls": [], "tool_results": []}],
                response={"role": "assistant", "text": reply, "tool_calls": []},
            )
            for i, (user, reply) in enumerate(turns)
        ]
    )


def _url(assignment, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("pairwise", args=[assignment.slug]) + (f"?{query}" if query else "")


def _section(body: str, name: str) -> str:
    start = body.index(f'<section id="{name}">')
    return body[start : body.index("</section>", start)]


def _line(body: str, marker: str) -> str:
    """The <tr> or <li> that holds `marker`."""
    at = body.index(marker)
    start = max(body.rfind("<tr", 0, at), body.rfind('<li class="turn-pair', 0, at))
    end = body.index("</tr>" if body[start:].startswith("<tr") else "</li>", at)
    return body[start:end]


@pytest.fixture
def pair(assignment):
    return _submission(assignment, "Ann"), _submission(assignment, "Ben")


def test_reviewers_cannot_open_the_pairwise_view(client, reviewer, assignment, pair) -> None:
    client.force_login(reviewer)
    a, b = pair
    assert client.get(_url(assignment, a=a.pk, b=b.pk)).status_code == 404


def test_without_a_choice_it_shows_the_pickers_and_says_what_it_does(
    client, lead, assignment, pair
) -> None:
    client.force_login(lead)
    page = client.get(_url(assignment))
    assert page.status_code == 200
    body = page.content.decode()
    assert '<select name="a">' in body and '<select name="b">' in body
    for s in pair:
        assert f'<option value="{s.pk}">{s.candidate.name} (#{s.pk})</option>' in body
    assert "Choose two candidates" in body and '<section id="checks">' not in body
    # The comparison's "pick…" link names one side: it is preselected.
    half = client.get(_url(assignment, a=pair[0].pk)).content.decode()
    assert f'<option value="{pair[0].pk}" selected>' in half and "Choose two" in half


def test_only_the_latest_submission_of_each_candidate_is_offered(
    client, lead, assignment, pair
) -> None:
    newer = _submission(assignment, "Ann", content="second upload")
    client.force_login(lead)
    body = client.get(_url(assignment)).content.decode()
    assert f'value="{newer.pk}"' in body and f'value="{pair[0].pk}"' not in body
    old = client.get(_url(assignment, a=pair[0].pk, b=pair[1].pk))
    assert old.status_code == 404
    assert "is an older upload of Ann" in old.content.decode()


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"a": "abc", "b": "1"}, 400, "“abc” is not a submission number"),
        ({"a": "1e3", "b": ""}, 400, "is not a submission number"),
        ({"a": "²", "b": "1"}, 400, "is not a submission number"),
        ({"a": "9" * 40, "b": "1"}, 400, "is not a submission number"),
        ({"a": "999999", "b": "SELF"}, 404, "There is no submission #999999."),
        ({"a": "SELF", "b": "SELF"}, 400, "A and B are the same submission"),
        ({"a": "OTHER", "b": "SELF"}, 404, "belongs to another assignment"),
    ],
)
def test_bad_choices_get_a_clear_message_not_a_server_error(
    client, lead, assignment, pair, params, status, message
) -> None:
    other = Assignment.objects.create(slug="other", title="Other", rubric="cassette")
    stranger = _submission(other, "Zed")
    names = {"SELF": str(pair[0].pk), "OTHER": str(stranger.pk)}
    query = {k: names.get(v, v) for k, v in params.items()}
    client.force_login(lead)
    page = client.get(reverse("pairwise", args=[assignment.slug]), query)
    assert page.status_code == status
    body = page.content.decode()
    assert message in body and 'role="alert"' in body
    assert '<select name="a">' in body  # the page, with its pickers, to choose again
    assert '<section id="checks">' not in body


def test_an_unknown_assignment_is_404(client, lead) -> None:
    client.force_login(lead)
    assert client.get(reverse("pairwise", args=["nope"])).status_code == 404


def test_checks_are_aligned_by_id_and_differences_are_marked(
    client, lead, assignment, pair
) -> None:
    a, b = pair
    rows = [
        (a, "cassettes.keys_match", "pass", "all keys match"),
        (b, "cassettes.keys_match", "pass", "all keys match"),
        (a, "cassettes.fresh", "fail", "recorded 90 days ago"),
        (b, "cassettes.fresh", "error", "could not read dates"),
        (a, "replay.offline_pass", "error", "needs the sandbox"),
        (b, "replay.offline_pass", "error", "needs the sandbox"),
        (a, "docs.entrypoints", "pass", "README names make test"),
        (b, "trace.live_match", "warn", "one hop differs"),
    ]
    CheckResult.objects.bulk_create(
        [CheckResult(submission=s, check_id=c, status=st, summary=m) for s, c, st, m in rows]
    )
    client.force_login(lead)
    body = client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode()
    checks = _section(body, "checks")
    assert checks.count('class="check-line') == 5  # the union of both sides' ids
    assert "2 of 5 differ" not in checks and "3 of 5 differ" in checks

    same = _line(checks, 'id="check-cassettes.keys_match"')
    assert "differs" not in same and same.count("status status-pass") == 2

    # A flaw found on one side, "could not run" on the other: different words and classes.
    fresh = _line(checks, 'id="check-cassettes.fresh"')
    assert 'class="check-line differs"' in fresh and "≠ differs" in fresh
    assert '<span class="status status-fail">flaw found</span>' in fresh
    assert '<span class="status status-error">could not run</span>' in fresh

    both_error = _line(checks, 'id="check-replay.offline_pass"')
    assert "differs" not in both_error and both_error.count("could not run") == 2

    only_a = _line(checks, 'id="check-docs.entrypoints"')
    assert "≠ differs" in only_a and "passed" in only_a and ">—</span>" in only_a
    only_b = _line(checks, 'id="check-trace.live_match"')
    assert only_b.index(">—</span>") < only_b.index("worth a look")  # A is empty, B has it


def test_rubric_rows_come_from_submitted_reviews_only(
    client, lead, reviewer, reviewer2, assignment, pair
) -> None:
    a, b = pair
    _review(a, reviewer, 3, evidence="replays offline, see cassettes/0001.json")
    _review(a, reviewer2, 3)
    _review(b, reviewer, 3)
    _review(b, reviewer2, 0, state="draft")  # still scoring: must not pull B's mean down
    client.force_login(lead)
    body = client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode()
    rubric = _section(body, "rubric")
    rows = RubricTemplate.objects.get(slug="cassette").rows.all()
    assert rubric.count('class="rubric-line') == len(rows)
    assert f"0 of {len(rows)} rows differ by mean" in rubric  # 3 and 3 against 3
    assert "still scoring, not counted: Ben (bob)" in rubric
    first = _line(rubric, rows[0].title)
    assert "bob: <strong>0</strong>" not in first and "differs" not in first
    # The evidence line is one click away, under the score it explains.
    assert re.search(
        r"<details><summary>alice: <strong>3</strong></summary>"
        r'<p class="evidence-line">replays offline, see cassettes/0001.json</p>',
        first,
    )
    total = _line(rubric, "Weighted total (of 100)")
    assert "differs" not in total and total.count("mean <strong>100.0</strong>") == 2

    # Once bob submits his 0s for Ben, every row's means differ and are marked.
    Review.objects.filter(submission=b, reviewer=reviewer2).update(state="submitted")
    body = client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode()
    rubric = _section(body, "rubric")
    assert f"{len(rows)} of {len(rows)} rows differ by mean" in rubric
    first = _line(rubric, rows[0].title)
    assert 'class="rubric-line differs"' in first and "≠ means differ" in first
    assert "mean 3</span>" in first and "mean 1.5</span>" in first
    assert "≠ means differ" in _line(rubric, "Weighted total (of 100)")


def test_conversations_pair_by_request_not_by_order_or_file_name(
    client, lead, assignment, pair
) -> None:
    a, b = pair
    _conversation(a, 0, [("Ticket 17: refund order", "refunded"), ("thanks", "bye")], "a/x.json")
    _conversation(a, 1, [("Ticket 42: printer on fire", "call IT")], "a/y.json")
    _conversation(a, 2, [("Ticket 99: lost parcel in Leeds", "ok")], "a/z.json")
    # Ben's agent ran the tickets in the other order, into differently named files.
    _conversation(b, 0, [("Ticket 42:   printer on fire", "evacuate")], "b/0001.yaml")
    _conversation(b, 1, [("Ticket 17: refund order", "refunded"), ("thanks", "bye")], "b/2.yaml")
    _conversation(b, 2, [("Ticket 5: password reset loop", "ok")], "b/3.yaml")
    client.force_login(lead)
    body = client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode()
    section = _section(body, "conversations")
    assert "3 on the same request" not in section and "2 on the same request" in section
    blocks = section.split('<details class="conversation')[1:]
    assert len(blocks) == 2
    refund, printer = blocks
    assert "A conversation 0 ↔ B conversation 1" in refund
    assert "paired by the same first user message" in refund
    assert "= identical turn by turn" in refund and "≠" not in refund
    assert "A conversation 1 ↔ B conversation 0" in printer
    assert printer.startswith(' differs"') and "≠ differs from turn 0" in printer
    turn = _line(printer, 'id="conversation-2-turn-0"')
    assert 'class="turn-pair differs"' in turn and "≠ differs" in turn
    assert "<del>call IT</del>" in turn and "<ins>evacuate</ins>" in turn
    assert "thread=1&amp;other_thread=0" in printer  # the full diff, the same pairing
    unpaired = section[section.index("Only in A") :]
    assert "conversation 2: Ticket 99: lost parcel in Leeds" in unpaired
    assert unpaired.index("Only in B") < unpaired.index("conversation 2: Ticket 5: password reset")


def test_the_same_ticket_worded_by_two_prompts_is_paired_by_closest_wording(
    client, lead, assignment, pair
) -> None:
    a, b = pair
    _conversation(a, 0, [("Ticket T-1001 (customer C-118): Checkout returns 502", "a")], "x")
    _conversation(a, 1, [("Ticket T-1003 (customer C-207): Charged twice", "b")], "y")
    _conversation(b, 0, [("Ticket T-1003 from customer C-207 Subject: Charged twice", "b")], "p")
    _conversation(b, 1, [("Ticket T-1001 from customer C-118 Subject: Checkout returns 502", "c")], "q")  # fmt: skip
    client.force_login(lead)
    section = _section(
        client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode(), "conversations"
    )
    assert (
        "A conversation 0 ↔ B conversation 1 · paired by the closest first user message" in section
    )
    assert "A conversation 1 ↔ B conversation 0" in section and "Only in A" not in section


def test_pairing_takes_identical_requests_first_and_one_partner_each() -> None:
    def entry(thread: int, text: str) -> dict:
        return {"thread": thread, "how": "first user message", "identity": text, "label": text}

    ours = [
        entry(0, "refund order 17 please now"),
        entry(1, "refund order 17 please"),
        entry(2, ""),
    ]
    theirs = [entry(5, "refund order 17 please"), entry(6, "refund order 17 please")]
    pairs, only_a, only_b, skipped = pair_conversations(ours, theirs)
    # Thread 1 is identical to 5; thread 0 only resembles them and gets the one left.
    assert [(m["thread"], t["thread"]) for m, t, _ in pairs] == [(0, 6), (1, 5)]
    assert [m["thread"] for m in only_a] == [2] and only_b == [] and not skipped


def test_candidate_text_is_escaped(client, lead, assignment) -> None:
    a = _submission(assignment, "<script>alert(1)</script>")
    b = _submission(assignment, 'Ben"><img src=x onerror=alert(2)>')
    _conversation(a, 0, [("<b>ticket</b>", "<script>alert(3)</script>")], "<i>.json")
    _conversation(b, 0, [("<b>ticket</b>", "<img src=y onerror=alert(4)>")], "b.json")
    CheckResult.objects.create(
        submission=a, check_id="cassettes.fresh", status="fail", summary="<script>x</script>"
    )
    client.force_login(lead)
    body = client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode()
    assert "<script>alert" not in body and "<img src=" not in body and "<b>ticket" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in body
    assert "&lt;script&gt;x&lt;/script&gt;" in body
    assert not re.search(r"\sstyle=", body) and "<style" not in body
    assert "css/pairwise.css" in body


def test_long_turns_and_many_turns_are_capped_and_say_so(client, lead, assignment, pair) -> None:
    a, b = pair
    long = "word " * 1000
    _conversation(a, 0, [("Ticket 1", long + "end A"), *[("more", "x")] * (MAX_TURNS + 5)], "a")
    _conversation(b, 0, [("Ticket 1", long + "end B"), *[("more", "x")] * (MAX_TURNS + 5)], "b")
    client.force_login(lead)
    section = _section(
        client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode(), "conversations"
    )
    assert section.count('<li class="turn-pair') == MAX_TURNS
    assert f"Only the first {MAX_TURNS} turns are shown." in section
    first = _line(section, 'id="conversation-1-turn-0"')
    # The two differ after the shown part: still marked, and the cut is said.
    assert "≠ differs" in first and "end A" not in first and "more characters not shown" in first


def test_conversations_beyond_the_cap_are_counted_not_rendered(
    client, lead, assignment, pair
) -> None:
    a, b = pair
    for side in pair:
        Turn.objects.bulk_create(
            [
                Turn(
                    submission=side,
                    thread=n,
                    index=0,
                    new_messages=[{"role": "user", "text": f"Ticket {n}"}],
                    response={"role": "assistant", "text": "ok"},
                )
                for n in range(MAX_THREADS + 3)
            ]
        )
    client.force_login(lead)
    section = _section(
        client.get(_url(assignment, a=a.pk, b=b.pk)).content.decode(), "conversations"
    )
    assert section.count('<details class="conversation') == MAX_THREADS
    assert f"Showing the first {MAX_THREADS} of {MAX_THREADS + 3} paired conversations" in section


def _populate(assignment, pair, reviewers, n: int) -> None:
    """n conversations of n turns each side, n checks each, and reviews."""
    checks = ["cassettes.keys_match", "cassettes.fresh", "cassettes.pruned", "docs.entrypoints"]
    for side, s in enumerate(pair):
        for reviewer in reviewers:
            _review(s, reviewer, 2 + side, evidence="see the cassette")
        CheckResult.objects.bulk_create(
            [
                CheckResult(
                    submission=s, check_id=f"{checks[i % 4]}.{i}", status="fail", summary="x"
                )
                for i in range(n)
            ]
        )
        for thread in range(n):
            _conversation(
                s, thread, [(f"Ticket {thread}", f"reply {side}")] * n, f"{side}/{thread}"
            )


@pytest.mark.parametrize("n", [2, 12])
def test_query_count_does_not_grow_and_a_get_never_writes(
    client, lead, reviewer, reviewer2, assignment, pair, n, django_assert_max_num_queries
) -> None:
    _populate(assignment, pair, [reviewer, reviewer2], n)
    client.force_login(lead)
    url = _url(assignment, a=pair[0].pk, b=pair[1].pk)
    with django_assert_max_num_queries(16), CaptureQueriesContext(connection) as ctx:
        page = client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert body.count('<details class="conversation') == n
    assert body.count('<li class="turn-pair') == n * n
    writes = [q["sql"] for q in ctx.captured_queries if not q["sql"].lstrip().startswith("SELECT")]
    assert writes == []
