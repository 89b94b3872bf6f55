"""bench/bench_pages.py's settings with the fragment cache off: every request renders."""

from __future__ import annotations

from bench.pages_settings import *  # noqa: F403
from bench.pages_settings import CACHES

CACHES = {**CACHES, "fragments": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
