"""manage.py reconcile: re-enqueue lost queued jobs and rescue or end orphaned running ones."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from submissions.jobs.queue import jobs_reconcile


class Command(BaseCommand):
    help = "Re-enqueue queued jobs the broker lost; rescue or end jobs whose worker died."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = jobs_reconcile()
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
