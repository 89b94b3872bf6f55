from __future__ import annotations

from .conftest import Client

KEY = {"Idempotency-Key": "idem-test-1"}


def test_first_post_creates_the_order(shop):
    status, order, headers = shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, KEY)
    assert status == 201
    assert order["id"].startswith("ord_") and order["qty"] == 2
    assert headers["X-Trace-Id"].startswith("tr_")


def test_same_key_same_body_replays_the_order(shop):
    _, first, _ = shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, KEY)
    status, again, _ = shop.request("POST", "/orders", {"qty": 2, "sku": "A-1"}, KEY)
    assert (status, again) == (200, first)


def test_same_key_different_body_is_a_conflict(shop):
    shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, KEY)
    status, body, _ = shop.request("POST", "/orders", {"sku": "A-1", "qty": 3}, KEY)
    assert status == 409 and "different body" in body["error"]


def test_missing_key_and_bad_input_are_rejected(shop):
    assert shop.request("POST", "/orders", {"sku": "A-1", "qty": 2})[0] == 400
    for bad in ({"sku": "Z-9", "qty": 1}, {"sku": "A-1", "qty": 0}, {"sku": "A-1", "qty": "2"},
                {"sku": "A-1", "qty": True}, {"sku": "A-1", "qty": 1, "note": "x"}, ["A-1"]):
        assert shop.request("POST", "/orders", bad, {"Idempotency-Key": "k-bad"})[0] == 400, bad
    assert shop.request("POST", "/orders", headers=KEY, raw=b"{not json")[0] == 400


def test_get_order_and_unknown_order(shop):
    _, order, _ = shop.request("POST", "/orders", {"sku": "C-3", "qty": 1}, KEY)
    assert shop.request("GET", f"/orders/{order['id']}")[:2] == (200, order)
    assert shop.request("GET", "/orders/ord_000000000000")[0] == 404


def test_trace_returns_what_the_stub_stored(shop):
    status, order, _ = shop.request("POST", "/orders", {"sku": "B-2", "qty": 3}, {**KEY, "X-Trace-Id": "tr_t1"})
    code, hop, _ = shop.request("GET", "/_trace/tr_t1")
    assert code == 200
    assert hop == {"trace_id": "tr_t1", "method": "POST", "path": "/orders", "status": status,
                   "req": {"sku": "B-2", "qty": 3}, "idempotency_key": "idem-test-1", "resp": order}
    assert shop.request("GET", "/_trace/tr_nope")[0] == 404


def test_a_restarted_stub_keeps_traces_and_keys(stub):
    start, state = stub
    first = Client(start())
    _, order, _ = first.request("POST", "/orders", {"sku": "A-1", "qty": 1}, {**KEY, "X-Trace-Id": "tr_keep"})
    assert state.is_file()
    second = Client(start())  # a new server process state, same file
    assert second.request("GET", "/_trace/tr_keep")[1]["resp"] == order
    assert second.request("POST", "/orders", {"sku": "A-1", "qty": 1}, KEY)[:2] == (200, order)
