from __future__ import annotations

from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"
    verbose_name = "Reviewing"

    def ready(self) -> None:
        from reviewer.cohort import table_cache

        table_cache.connect()
