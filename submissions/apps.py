from __future__ import annotations

from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "submissions"
    verbose_name = "Submissions"

    def ready(self) -> None:
        # Importing the handler modules registers each job kind with the runner.
        from submissions import intake, selftest  # noqa: F401
