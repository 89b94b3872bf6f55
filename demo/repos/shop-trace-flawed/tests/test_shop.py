import json

import harness

from .conftest import REPO


def test_create_and_fetch_order(shop):
    status, order, _ = shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, {"Idempotency-Key": "k1"})
    assert status == 201
    assert shop.request("GET", f"/orders/{order['id']}")[1] == order


def test_retry_with_same_key_does_not_duplicate(shop):
    first = shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, {"Idempotency-Key": "k1"})[1]
    status, again, _ = shop.request("POST", "/orders", {"sku": "A-1", "qty": 2}, {"Idempotency-Key": "k1"})
    assert status == 200 and again == first


def test_missing_key_is_rejected(shop):
    assert shop.request("POST", "/orders", {"sku": "A-1", "qty": 2})[0] == 400


def test_harness_replays_all_scenarios(shop):
    scenarios = json.loads((REPO / "scenarios.json").read_text())
    log, answers = harness.run_all(scenarios, harness.RecordedModel(REPO / "recordings"), shop.base)
    assert set(answers) == {"single-order", "two-items", "bad-quantity"}
    assert "ord_" in answers["single-order"]
