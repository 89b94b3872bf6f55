"""manage.py seed_demo: the demo cohort, ingested like any upload."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from reviewer.ops.demo import demo_seed


class Command(BaseCommand):
    help = "Create the demo users, assignments and candidate submissions (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        seeded = demo_seed()
        for result in seeded.results:
            s = result.submission
            state = "new" if result.created else "existing"
            note = f" REJECTED: {result.reason}" if result.reason else ""
            self.stderr.write(
                f"  {s.assignment.slug:<18} {s.candidate.name:<22} #{s.pk} ({state}){note}"
            )
        self.stdout.write("Demo logins (password after the colon):")
        for username, password, group in seeded.users:
            self.stdout.write(f"  {username}:{password}   ({group})")
