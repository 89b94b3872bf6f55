"""Per-turn diffs: alignment, first divergence, word marks, tool calls, escaping, the page."""

from __future__ import annotations

import io
from unittest import mock

from django.urls import reverse

from cassettes_app.diff import diff_turns, render_segments, word_diff
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, Turn
from tests.conftest import make_zip


def _turn(user: str, answer: str, calls=()) -> dict:
    return {
        "new_messages": [{"role": "user", "text": user, "tool_calls": [], "tool_results": []}],
        "response": {
            "role": "assistant",
            "text": answer,
            "tool_calls": [{"name": n, "arguments": a} for n, a in calls],
        },
    }


def test_word_diff_marks_only_the_changed_words() -> None:
    left, right = word_diff("the cat sat on the mat", "the dog sat on the mat")
    assert [s.kind for s in left] == ["same", "del", "same"]
    assert [s.text for s in right if s.kind == "add"] == ["dog"]


def test_first_diverging_turn_and_tool_argument_changes() -> None:
    a = [_turn("hi", "hello"), _turn("order", "ok", [("create_order", {"sku": "A-1", "qty": 1})])]
    b = [_turn("hi", "hello"), _turn("order", "ok", [("create_order", {"sku": "A-1", "qty": 2})])]
    rows, first = diff_turns(a, b)
    assert first == 1
    assert not rows[0].changed and rows[1].changed
    assert rows[1].tool_changes == [
        'create_order: arguments {"qty": 1, "sku": "A-1"} → {"qty": 2, "sku": "A-1"}'
    ]


def test_extra_turns_on_one_side_diverge() -> None:
    rows, first = diff_turns([_turn("a", "b")], [_turn("a", "b"), _turn("c", "d")])
    assert first == 1 and rows[1].left is None


def test_identical_conversations_have_no_divergence() -> None:
    turns = [_turn("a", "b"), _turn("c", "d")]
    assert diff_turns(turns, list(turns))[1] is None


def test_rendering_escapes_candidate_text_and_folds_long_text() -> None:
    left, _ = word_diff("<script>alert(1)</script> x", "<script>alert(1)</script> y")
    html, _ = render_segments(left)
    assert "<script>" not in html and "&lt;script&gt;" in html and "<del>x</del>" in html
    long_segments, _ = word_diff("word " * 2000, "word " * 2000)
    html, folded = render_segments(long_segments, fold_at=100)
    assert folded and len(html) < 200


def test_diff_page_aligns_two_submissions(client, reviewer, assignment) -> None:
    subs = []
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name, answer in (("Ann", "ord_1 created"), ("Ben", "<b>ord_2</b> created")):
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": name})),
                filename="r.zip",
                candidate=Candidate.objects.create(name=name),
                assignment=assignment,
                uploaded_by=reviewer,
            ).submission
            for i, (user, reply) in enumerate([("hi", "hello"), ("buy", answer)]):
                t = _turn(user, reply)
                Turn.objects.create(
                    submission=s,
                    thread=0,
                    index=i,
                    new_messages=t["new_messages"],
                    response=t["response"],
                )
            subs.append(s)
    client.force_login(reviewer)
    url = reverse("turn_diff", args=[subs[0].pk]) + f"?against={subs[1].pk}"
    page = client.get(url).content.decode()
    assert 'First diverging turn: <a href="#turn-1">' in page
    assert "<ins>&lt;b&gt;ord_2&lt;/b&gt;</ins>" in page
    assert "<b>ord_2</b>" not in page


def test_diff_against_an_invisible_submission_is_404(client, reviewer, lead, assignment) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        mine = submission_create(
            upload=io.BytesIO(make_zip({"a": "1"})),
            filename="a.zip",
            candidate=Candidate.objects.create(name="Mine"),
            assignment=assignment,
            uploaded_by=reviewer,
        ).submission
        theirs = submission_create(
            upload=io.BytesIO(make_zip({"b": "2"})),
            filename="b.zip",
            candidate=Candidate.objects.create(name="Theirs"),
            assignment=assignment,
            uploaded_by=lead,
        ).submission
    client.force_login(reviewer)
    url = reverse("turn_diff", args=[mine.pk]) + f"?against={theirs.pk}"
    assert client.get(url).status_code == 404


def test_tool_calls_are_part_of_the_shown_text() -> None:
    from cassettes_app.diff import turn_text

    turn = {
        "new_messages": [{"role": "user", "text": "where is my order?"}],
        "response": {
            "role": "assistant",
            "text": "",
            "tool_calls": [{"name": "lookup_order", "arguments": {"id": "ord_1"}}],
        },
    }
    assert '[tool call] lookup_order({"id": "ord_1"})' in turn_text(turn)


def _conversations(assignment, reviewer, name: str, threads: list[list[tuple[str, str]]]):
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(make_zip({"n": name})),
            filename="r.zip",
            candidate=Candidate.objects.create(name=name),
            assignment=assignment,
            uploaded_by=reviewer,
        ).submission
    for number, turns in enumerate(threads):
        for i, (user, reply) in enumerate(turns):
            t = _turn(user, reply)
            Turn.objects.create(
                submission=s, thread=number, index=i, new_messages=t["new_messages"],
                response=t["response"],
            )  # fmt: skip
    return s


def test_threads_are_paired_by_their_first_request_not_their_number(
    client, reviewer, assignment
) -> None:
    ann = _conversations(assignment, reviewer, "Ann", [
        [("Ticket 17: refund order", "refunded")], [("Ticket 42: printer on fire", "call IT")],
    ])  # fmt: skip
    ben = _conversations(assignment, reviewer, "Ben", [
        [("Ticket 42:   printer on fire", "evacuate")], [("Ticket 17: refund order", "refunded")],
    ])  # fmt: skip
    client.force_login(reviewer)
    url = reverse("turn_diff", args=[ann.pk])
    page = client.get(url, {"against": ben.pk, "thread": 1}).content.decode()
    assert "Paired by the same first user message: their conversation 0." in page
    assert "<ins>evacuate</ins>" in page  # ticket 42 against ticket 42
    same = client.get(url, {"against": ben.pk, "thread": 0}).content.decode()
    assert "identical turn by turn" in same  # ticket 17 against ticket 17, their thread 1
    chosen = client.get(url, {"against": ben.pk, "thread": 0, "other_thread": 0}).content
    assert b"Paired by" not in chosen and b"First diverging turn" in chosen


def test_a_conversation_with_no_partner_or_no_turns_says_so(client, reviewer, assignment) -> None:
    ann = _conversations(assignment, reviewer, "Ann", [[("Ticket 9: lost parcel", "found")]])
    ben = _conversations(assignment, reviewer, "Ben", [[("Ticket 3: other", "x")]])
    empty = _conversations(assignment, reviewer, "Cy", [])
    client.force_login(reviewer)
    url = reverse("turn_diff", args=[ann.pk])
    page = client.get(url, {"against": ben.pk}).content.decode()
    assert "No conversation of Ben starts with the same first user message" in page
    assert "identical turn by turn" not in page and '<table class="grid diff"' not in page
    nothing = client.get(
        reverse("turn_diff", args=[empty.pk]), {"against": ben.pk, "other_thread": 5}
    ).content.decode()
    assert "Neither side has turns" in nothing and "identical turn by turn" not in nothing


def test_the_same_ticket_worded_by_two_prompts_is_paired(client, reviewer, assignment) -> None:
    ann = _conversations(assignment, reviewer, "Ann", [
        [("Ticket T-1001 (customer C-118): Checkout returns 502 since last night", "a")],
        [("Ticket T-1003 (customer C-207): Charged twice for November order", "b")],
    ])  # fmt: skip
    ben = _conversations(assignment, reviewer, "Ben", [
        [("Ticket T-1003 from customer C-207 Subject: Charged twice for November order", "b")],
        [("Ticket T-1001 from customer C-118 Subject: Checkout returns 502 since last night",
          "c")],
    ])  # fmt: skip
    client.force_login(reviewer)
    page = client.get(
        reverse("turn_diff", args=[ann.pk]), {"against": ben.pk, "thread": 0}
    ).content.decode()
    assert "Paired by the closest first user message" in page
    assert "their conversation 1." in page and "<ins>c</ins>" in page


def _tool_turn(user: str, arguments: str, result: str, answer: str) -> dict:
    """An OpenAI-shaped turn: the model calls a tool (arguments as JSON text), the tool's
    result comes back as JSON text, the model answers."""
    return {
        "new_messages": [
            {"role": "user", "text": user, "tool_calls": [], "tool_results": []},
            {
                "role": "assistant",
                "text": "",
                "tool_calls": [{"name": "create_order", "arguments": arguments}],
                "tool_results": [],
            },
            {
                "role": "tool",
                "text": "",
                "tool_calls": [],
                "tool_results": [{"tool_call_id": "call_1", "content": result}],
            },
        ],
        "response": {"role": "assistant", "text": answer, "tool_calls": []},
    }


_RESULT = (
    '{"order": {"id": "ord_7f3a", "status": "created", "items": [{"sku": "A-1", "qty": 2, '
    '"price": 19.0}]}, "idempotency_key": "k-1", "replayed": false}'
)
_RESULT_REORDERED = (
    '{"replayed": false, "idempotency_key": "k-1", "order": {"items": [{"price": 19, '
    '"qty": 2, "sku": "A-1"}], "status": "created", "id": "ord_7f3a"}}'
)


def test_json_key_order_in_tool_results_and_arguments_is_no_change() -> None:
    a = [_tool_turn("buy 2 A-1", '{"sku": "A-1", "qty": 2}', _RESULT, "ord_7f3a created")]
    b = [_tool_turn("buy 2 A-1", '{"qty":2,"sku":"A-1"}', _RESULT_REORDERED, "ord_7f3a created")]
    rows, first = diff_turns(a, b)
    assert first is None and not rows[0].changed and rows[0].reordered
    assert rows[0].tool_changes == []
    html, _ = render_segments(rows[0].left_segments)
    # Shown once, in canonical form (sorted keys, 19.0 as 19), with nothing marked.
    assert "&quot;idempotency_key&quot;: &quot;k-1&quot;, &quot;order&quot;" in html
    assert "&quot;price&quot;: 19," in html and "<del>" not in html


def test_a_real_change_inside_reordered_json_is_marked_alone() -> None:
    shipped = _RESULT_REORDERED.replace('"created"', '"shipped"')
    rows, first = diff_turns(
        [_tool_turn("buy", '{"sku": "A-1", "qty": 2}', _RESULT, "ok")],
        [_tool_turn("buy", '{"qty": 3, "sku": "A-1"}', shipped, "ok")],
    )
    assert first == 0 and rows[0].changed
    assert [s.text for s in rows[0].left_segments if s.kind == "del"] == ["2,", '"created"},']
    assert [s.text for s in rows[0].right_segments if s.kind == "add"] == ["3,", '"shipped"},']
    assert rows[0].tool_changes == [
        'create_order: arguments {"qty": 2, "sku": "A-1"} → {"qty": 3, "sku": "A-1"}'
    ]


def test_json_true_is_not_one_and_text_stays_text() -> None:
    rows, first = diff_turns(
        [_tool_turn("x", "{}", '{"needs_human": true}', "{not json")],
        [_tool_turn("x", "{}", '{"needs_human": 1}', "{not  json")],
    )
    assert first == 0 and not rows[0].reordered
    assert [s.text for s in rows[0].right_segments if s.kind == "add"] == ["1}", "  "]


def test_the_diff_page_opens_on_a_diff_and_says_key_order_is_no_change(
    client, reviewer, assignment
) -> None:
    subs = []
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name, result in (("Ann", _RESULT), ("Ben", _RESULT_REORDERED)):
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": name})),
                filename="r.zip",
                candidate=Candidate.objects.create(name=name),
                assignment=assignment,
                uploaded_by=reviewer,
            ).submission
            for i, t in enumerate(
                [
                    _tool_turn("Ticket 7: buy 2 A-1", '{"sku": "A-1", "qty": 2}', result, "done"),
                    _turn("thanks", "bye" if name == "Ann" else "goodbye"),
                ]
            ):
                Turn.objects.create(
                    submission=s, thread=0, index=i, new_messages=t["new_messages"],
                    response=t["response"],
                )  # fmt: skip
            subs.append(s)
    client.force_login(reviewer)
    # No "Show" pressed: the page opens on the other hand-in and the paired conversation.
    page = client.get(reverse("turn_diff", args=[subs[0].pk])).content.decode()
    assert f'<option value="{subs[1].pk}" selected>' in page
    assert 'First diverging turn: <a href="#turn-1">turn 1</a>' in page
    assert "<del>bye</del>" in page and "<ins>goodbye</ins>" in page
    assert "1 turn holds JSON written another way" in page
    assert "same JSON written another way (key order, spacing)" in page
    turn0 = page[page.index('id="turn-0"') : page.index('id="turn-1"')]
    assert "<del>" not in turn0 and "<ins>" not in turn0


def test_arguments_as_an_object_or_as_json_text_are_the_same_call() -> None:
    """One provider gives a call's arguments as an object, another as JSON text."""
    rows, first = diff_turns(
        [_turn("buy", "ok", [("create_order", {"sku": "A-1", "qty": 2})])],
        [_turn("buy", "ok", [("create_order", '{"qty":2.0,"sku":"A-1"}')])],
    )
    assert first is None and rows[0].reordered and rows[0].tool_changes == []
    changed, first = diff_turns(
        [_turn("buy", "ok", [("create_order", {"sku": "A-1", "qty": 2})])],
        [_turn("buy", "ok", [("create_order", '{"qty":"2","sku":"A-1"}')])],
    )
    assert first == 0 and changed[0].tool_changes == [
        'create_order: arguments {"qty": 2, "sku": "A-1"} → {"qty": "2", "sku": "A-1"}'
    ]
