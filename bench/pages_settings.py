"""Settings for bench/bench_pages.py: the real settings, plus a trivial view to compare against."""

from __future__ import annotations

from reviewer.settings import *  # noqa: F403

ROOT_URLCONF = "bench.pages_urls"
