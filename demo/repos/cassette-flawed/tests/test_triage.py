from triager.bot import Tools, load, triage_all
from triager.cassettes import Cassettes, request_key


def test_request_key_ignores_volatile_fields():
    a = {"model": "x", "messages": [], "user": "a", "request_id": "1"}
    b = {"model": "x", "messages": [], "user": "b", "request_id": "2"}
    assert request_key(a) == request_key(b)
    assert len(request_key(a)) == 16


def test_triage_replays_all_tickets():
    answers = triage_all(load("data/tickets.json"), Cassettes(mode="replay"), Tools())
    by_id = {a["ticket_id"]: a for a in answers}
    assert by_id["T-1001"]["priority"] == "P1"
    assert by_id["T-1002"]["team"] == "identity"
    assert by_id["T-1003"]["tools_used"] == ["get_customer", "get_service_status"]
    assert by_id["T-1004"]["category"] == "feature_request"
