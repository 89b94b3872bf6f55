import app


def test_rule_based_finds_timestamp_and_severity():
    t = app.rule_based("2026-11-12T08:14:03Z checkout-api ERROR upstream timed out")
    assert t["first_seen"] == "2026-11-12T08:14:03Z"
    assert t["severity"] == "high"
    assert t["needs_human"] is True


def test_rule_based_critical():
    assert app.rule_based("payments: FATAL ledger mismatch")["severity"] == "critical"
    assert app.rule_based("payments: FATAL ledger mismatch")["service"] == "payments"


def test_extract_uses_model(monkeypatch, tmp_path):
    monkeypatch.setattr(app, "LEDGER", str(tmp_path / "ledger.jsonl"))
    monkeypatch.setattr(app, "ask_model", lambda line: {
        "service": "checkout-api", "severity": "high", "first_seen": "2026-11-12T08:14:03Z",
        "evidence": "timed out", "confidence": 0.9, "needs_human": False})
    ticket = app.extract("2026-11-12T08:14:03Z checkout-api ERROR upstream timed out")
    assert ticket["service"] == "checkout-api"
