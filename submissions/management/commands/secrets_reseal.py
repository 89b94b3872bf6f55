"""Seal every kept secret again with the first key of SECRET_STORE_KEYS (key rotation)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from submissions.models import Submission
from submissions.sealed import SecretUnreadable, reseal


class Command(BaseCommand):
    help = (
        "Seal the kept access tokens again with the first key of SECRET_STORE_KEYS; "
        "after it, the old keys can be dropped."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        done = unreadable = 0
        rows = Submission.objects.exclude(source_auth_sealed="").only("pk", "source_auth_sealed")
        for submission in rows.iterator():
            try:
                sealed = reseal(submission.source_auth_sealed)
            except SecretUnreadable as exc:
                unreadable += 1
                self.stderr.write(f"submission {submission.pk}: {exc}")
                continue
            Submission.objects.filter(pk=submission.pk).update(source_auth_sealed=sealed)
            done += 1
        self.stdout.write(f"{done} secret(s) sealed again with the first key")
        if unreadable:
            raise CommandError(f"{unreadable} secret(s) did not open: they were left as they were")
