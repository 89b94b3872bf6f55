"""The slow tests: a real Celery worker, the real sandbox, a real browser (marked; CI runs them)."""
