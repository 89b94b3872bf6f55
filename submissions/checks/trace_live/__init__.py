"""Trace verification against a candidate's shop stub, one module per mechanism.

- `live`: `trace.live_match` by re-fetching each row from the live stub's `/_trace/{id}`;
- `idempotency`: `trace.idempotency_enforced` by probing the live stub's POST /orders;
- `redrive`: `trace.live_match` by re-driving the trace against a freshly started stub;
- `rows`: what the live re-fetch and the re-drive share (row results, JSON comparison, URLs,
  the status table).

Plain functions: no Django, no Celery; the outbound allowlist comes in as an argument.
"""
