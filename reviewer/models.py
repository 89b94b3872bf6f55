"""Rubrics, reviews, scores and notes: the reviewing domain."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from submissions.models import Assignment, Submission


class RubricTemplate(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    builtin = models.BooleanField(default=False)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title

    @property
    def total_weight(self) -> int:
        return sum(row.weight for row in self.rows.all())


class RubricRow(models.Model):
    template = models.ForeignKey(RubricTemplate, on_delete=models.CASCADE, related_name="rows")
    order = models.PositiveSmallIntegerField(default=0)
    title = models.CharField(max_length=200)
    weight = models.PositiveSmallIntegerField(validators=[MaxValueValidator(100)])
    how_to_check = models.TextField(blank=True)
    check_ids = models.JSONField(default=list, blank=True)
    # What each level means on this row: four descriptions, for 0, 1, 2 and 3 (or none).
    anchors = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["template", "order", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["template", "order"], name="unique_row_order")
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.weight})"


class Review(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews"
    )

    class Recommendation(models.TextChoices):
        # Greenhouse's four: no middle, so a reviewer says which way they lean.
        STRONG_NO = "strong_no", "Strong no"
        NO = "no", "No"
        YES = "yes", "Yes"
        STRONG_YES = "strong_yes", "Strong yes"

    rubric = models.ForeignKey(RubricTemplate, on_delete=models.PROTECT, related_name="reviews")
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    # The reviewer's overall call on the hand-in, beside the rubric's weighted total.
    recommendation = models.CharField(
        max_length=12, choices=Recommendation.choices, blank=True, default=""
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["submission", "reviewer"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "reviewer"], name="one_review_each")
        ]

    def __str__(self) -> str:
        return f"Review of {self.submission} by {self.reviewer}"


class Score(models.Model):
    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="scores")
    row = models.ForeignKey(RubricRow, on_delete=models.PROTECT, related_name="scores")
    value = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(3)]
    )
    evidence = models.TextField(blank=True)
    override_reason = models.TextField(blank=True)
    # Bumped on every save; a save carrying an older version is a conflict, not an overwrite.
    version = models.PositiveIntegerField(default=0)
    # The page (tab) that saved last and that page's own count of changes: two quick
    # changes in one page are that page's latest intent, not a conflict; a late answer
    # to the earlier one never overwrites the later.
    tab = models.CharField(max_length=32, blank=True, default="")
    seq = models.PositiveBigIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["row__order"]
        constraints = [models.UniqueConstraint(fields=["review", "row"], name="one_score_per_row")]

    def __str__(self) -> str:
        return f"{self.row.title}: {self.value}"


class Note(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    row = models.ForeignKey(RubricRow, null=True, blank=True, on_delete=models.SET_NULL)
    # What the note is pinned to, when not a rubric row: "check:<check id>",
    # "turn:<thread>.<index>" or "hop:<line>" (the evidence it is about).
    anchor = models.CharField(max_length=200, blank=True, default="")
    body = models.TextField(help_text="Markdown; rendered sanitised.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"Note by {self.author} on {self.submission}"


class ScoreEvent(models.Model):
    """One change of a review, kept for ever: who, when, old → new, and the reason given.

    Written beside every score, note, pin and submit, in the same transaction; never
    updated or deleted by the app, so no score or note changes without a trace.
    """

    class Kind(models.TextChoices):
        SCORE = "score", "score"
        NOTE = "note", "note"
        PIN = "pin", "pinned note"
        SUBMIT = "submit", "submitted"
        RECOMMEND = "recommend", "recommendation"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="events")
    review = models.ForeignKey(Review, null=True, blank=True, on_delete=models.CASCADE)
    row = models.ForeignKey(RubricRow, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [models.Index(fields=["submission", "at"])]

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor} at {self.at:%Y-%m-%d %H:%M}"


class TableGeneration(models.Model):
    """How many times what an assignment's comparison table shows has changed: the table is
    cached under this number (reviewer/cohort/table_cache.py). Moved on by an UPDATE in the
    transaction of the change, so a request sees new rows and the new number together."""

    assignment = models.OneToOneField(
        Assignment, on_delete=models.CASCADE, primary_key=True, related_name="table_generation"
    )
    value = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.assignment_id}: {self.value}"


class StoredTable(models.Model):
    """An assignment's comparison table as a worker last rendered it (its landing view: no
    filter, first page), so a web process that has not built it yet reads it rather than
    building it (reviewer/cohort/table_cache.py). It counts only while `value` is its
    generation's value and `layout` names the code that renders it; deleted with its
    generation, so a generation made anew never meets an older table."""

    generation = models.OneToOneField(
        TableGeneration, on_delete=models.CASCADE, primary_key=True, related_name="stored"
    )
    value = models.PositiveBigIntegerField()
    layout = models.CharField(max_length=100)
    # zlib-compressed UTF-8: a tenth of the size, so a tenth of the bytes to read (a 1,000-
    # candidate table is 340 KB of HTML; read as text it took 6 ms, compressed 1.5 ms).
    html_z = models.BinaryField()
    stored_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.generation_id}: {self.value}"
