"""The demo cohort: users, assignments and candidate repos made by the project itself."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from submissions.assignments import assignment_apply, load_assignment_file
from submissions.intake.upload import IntakeResult, submission_create
from submissions.models import Assignment, Candidate
from submissions.roles import HIRING_LEADS, REVIEWERS

DEMO_DIR = Path(settings.BASE_DIR) / "demo"

# Demo logins are public by design: they only ever guard demo data.
DEMO_USERS = [
    ("reviewer", "review-the-tapes", REVIEWERS),
    ("reviewer2", "review-the-tapes", REVIEWERS),
    ("lead", "lead-the-hiring", HIRING_LEADS),
]


@dataclass
class Seeded:
    users: list[tuple[str, str, str]]
    results: list[IntakeResult]


def zip_tree(root: Path, prefix: str) -> bytes:
    """Zip a folder the way a repository host's "download ZIP" does (one top-level folder)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part in {"__pycache__", ".pytest_cache", "out"} for part in rel.parts):
                continue
            if path.is_file() and not path.is_symlink():
                info = zipfile.ZipInfo(
                    f"{prefix}/{rel.as_posix()}", date_time=(2026, 11, 1, 0, 0, 0)
                )
                info.external_attr = (0o755 if path.stat().st_mode & 0o111 else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def demo_users_ensure() -> list[tuple[str, str, str]]:
    """Create the demo users and role groups, resetting their passwords to the printed ones."""
    user_model = get_user_model()
    for group in (REVIEWERS, HIRING_LEADS):
        Group.objects.get_or_create(name=group)
    # The read-only demo's anonymous visitors read as this hiring lead (it has no password).
    viewer, _ = user_model.objects.get_or_create(username="demo-viewer")
    viewer.set_unusable_password()
    viewer.save()
    viewer.groups.add(Group.objects.get(name=HIRING_LEADS))
    for username, password, group in DEMO_USERS:
        user, _ = user_model.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_staff = group == HIRING_LEADS
        user.save()
        user.groups.add(Group.objects.get(name=group))
    return DEMO_USERS


def demo_seed(demo_dir: Path = DEMO_DIR) -> Seeded:
    """Apply the demo assignments and ingest every demo repo like an upload."""
    users = demo_users_ensure()
    for path in sorted((demo_dir / "assignments").glob("*.yaml")):
        assignment_apply(values=load_assignment_file(path))
    entries = yaml.safe_load((demo_dir / "candidates.yaml").read_text(encoding="utf-8")) or []
    user_model = get_user_model()
    reviewers = list(user_model.objects.filter(username__in=["reviewer", "reviewer2"]))
    results = []
    for index, entry in enumerate(entries):
        repo = demo_dir / "repos" / entry["repo"]
        assignment = Assignment.objects.get(slug=entry["assignment"])
        candidate, _ = Candidate.objects.get_or_create(name=entry["candidate"])
        data = zip_tree(repo, f"{entry['repo']}-main")
        result = submission_create(
            upload=io.BytesIO(data),
            filename=f"{entry['repo']}-main.zip",
            candidate=candidate,
            assignment=assignment,
            stub_url=entry.get("stub_url", ""),
        )
        # Every demo submission goes to the first reviewer; every other one to the second too.
        assigned = reviewers[:1] + (reviewers[1:] if index % 2 == 0 else [])
        result.submission.reviewers.add(*assigned)
        results.append(result)
    demo_reviews_seed(demo_dir)
    return Seeded(users=users, results=results)


def _demo_recommendation(scores: list[int]) -> str:
    """An entry without its own recommendation leans the way its scores do."""
    mean = sum(scores) / len(scores) if scores else 0
    if mean >= 2.5:
        return "strong_yes"
    if mean >= 1.75:
        return "yes"
    return "no" if mean >= 1 else "strong_no"


def demo_reviews_seed(demo_dir: Path = DEMO_DIR) -> int:
    """Submit the earlier reviewers' reviews of `reviews.yaml` through the scoring functions
    (so their audit trail is real), each once: a review already there is left as it is.
    Returns how many were submitted now."""
    from reviewer.review.scoring import review_get_or_create, review_submit, score_save
    from submissions.models import Submission

    path = demo_dir / "reviews.yaml"
    if not path.exists():
        return 0
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    user_model = get_user_model()
    group = Group.objects.get(name=REVIEWERS)
    people = {}
    for name in data.get("reviewers", []):
        user, created = user_model.objects.get_or_create(username=name)
        if created:
            user.set_unusable_password()  # a name on the demo's reviews, never a login
            user.save()
        user.groups.add(group)
        people[name] = user
    done = 0
    for entry in data.get("reviews", []):
        submission = (
            Submission.objects.filter(
                candidate__name=entry["candidate"], assignment__slug=entry["assignment"]
            )
            .order_by("-created")
            .first()
        )
        reviewer = people[entry["by"]]
        if submission is None or submission.reviews.filter(reviewer=reviewer).exists():
            continue
        submission.reviewers.add(reviewer)
        review = review_get_or_create(submission=submission, reviewer=reviewer)
        if review is None:
            continue
        rows = list(review.rubric.rows.all())
        if len(entry["scores"]) != len(rows) or len(entry["evidence"]) != len(rows):
            raise ValueError(
                f"{path.name}: {entry['candidate']} by {entry['by']} needs {len(rows)} scores "
                "and evidence lines, one per rubric row"
            )
        for row, value, evidence in zip(rows, entry["scores"], entry["evidence"], strict=True):
            score_save(
                review=review,
                row=row,
                value=value,
                evidence=evidence,
                # A 3 before the row's checks have run needs a reason; this is it.
                override_reason=f"checked by hand: {evidence}" if value == 3 else "",
                expected_version=0,
            )
        review_submit(
            review=review,
            recommendation=entry.get("recommendation") or _demo_recommendation(entry["scores"]),
        )
        done += 1
    return done


@dataclass(frozen=True)
class StartHere:
    """One place the demo's visitor should look first, and what to look for there."""

    title: str
    url: str
    line: str
    download: bool = False


# The demo's tour: a hand-in with flaws the checks catch, the cohort's comparison (where
# two earlier reviewers disagree) and the committee's report. A repo of candidates.yaml.
START_HERE_REPO = "cassette-flawed"


def demo_start_here(demo_dir: Path = DEMO_DIR) -> list[StartHere]:
    """The demo home's "start here" card; empty when the demo cohort is not seeded."""
    from django.urls import reverse

    from submissions.models import Submission

    path = demo_dir / "candidates.yaml"
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else []
    entry = next((e for e in entries or [] if e.get("repo") == START_HERE_REPO), None)
    if entry is None:
        return []
    flawed = (
        Submission.objects.filter(
            candidate__name=entry["candidate"], assignment__slug=entry["assignment"]
        )
        .select_related("assignment")
        .order_by("-created")
        .first()
    )
    if flawed is None:
        return []
    slug = flawed.assignment.slug
    return [
        StartHere(
            f"A flawed hand-in: {entry['candidate']}",
            flawed.get_absolute_url(),
            "Read the verdict first: a hand-edited cassette whose key no longer matches its "
            "request, each flaw one click from its evidence and the file it names.",
        ),
        StartHere(
            f"The comparison: {flawed.assignment.title}",
            reverse("comparison", args=[slug]),
            "Two earlier reviewers' totals side by side; a flag marks where they disagree, "
            "and each score unfolds to the evidence line its reviewer wrote.",
        ),
        StartHere(
            "The committee report",
            reverse("cohort_report", args=[slug]),
            "One self-contained HTML file for Thursday's committee: every candidate's checks, "
            "scores and notes, readable offline.",
            download=True,
        ),
    ]
