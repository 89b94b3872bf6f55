"""Candidates, assignments, submissions, their jobs and what the checks found."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from cassettes_app.config import DEFAULT_ID_PATTERN
from submissions.roles import is_hiring_lead


class Candidate(models.Model):
    name = models.CharField(max_length=200, unique=True)
    email = models.EmailField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Assignment(models.Model):
    class Shape(models.TextChoices):
        CASSETTE = "cassette", "Cassette"
        RUN_TWICE = "run-twice", "Run twice"
        TRACE = "trace", "Trace"
        TICKET_SERVICE = "ticket-service", "Ticket service"

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    shape = models.CharField(max_length=20, choices=Shape.choices, default=Shape.CASSETTE)
    replay_command = models.CharField(max_length=500, blank=True)
    graded_outputs = models.JSONField(default=list, blank=True)
    recording_globs = models.JSONField(default=list, blank=True)
    trace_globs = models.JSONField(default=list, blank=True)
    ledger_globs = models.JSONField(default=list, blank=True)
    volatile_fields = models.JSONField(default=list, blank=True)
    # Keys of a JSON answer the hand-in is graded on (`intent`, `needs_human`): a live spot
    # check calls out their drift apart from the rest.
    graded_fields = models.JSONField(default=list, blank=True)
    # The hand-in's own record mode, run in the sandbox behind the model proxy (record pass),
    # and the variables its sandbox sees: name -> base_url | origin | key (the placeholder).
    record_command = models.TextField(blank=True)
    record_env = models.JSONField(default=dict, blank=True)
    # The assignment's own reference hand-in (the demo's, a sample solution), spot-checked
    # every so many days by the scheduler (0: never), so stale recordings show as drift.
    reference_submission = models.ForeignKey(
        "Submission", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    spot_check_every_days = models.PositiveSmallIntegerField(default=0)
    # The reference as the assignment file names it: this candidate's latest hand-in (a name
    # travels with the file; a submission id belongs to one deployment). Wins when set.
    reference_candidate = models.CharField(max_length=200, blank=True)
    stale_after_days = models.PositiveIntegerField(default=42)
    expected_model = models.CharField(max_length=200, blank=True)
    id_pattern = models.CharField(max_length=200, default=DEFAULT_ID_PATTERN)
    stub_start_command = models.CharField(max_length=500, blank=True)
    service_start_command = models.CharField(max_length=500, blank=True)
    service_port = models.PositiveIntegerField(null=True, blank=True)
    service_request = models.JSONField(default=dict, blank=True)
    ticket_schema = models.JSONField(null=True, blank=True)
    # The fingerprints of the brief's own starter code (`starter_files` in the assignment
    # file): never counted by `cohort.code_similarity`. Sorted, distinct.
    starter_fingerprints = models.JSONField(default=list, blank=True)
    # Per-check overrides of the shape's rules (`checks:` in the assignment file).
    check_rules = models.JSONField(default=dict, blank=True)
    # The rubric is named by slug: rubrics live in `reviewer`, which depends on this app,
    # never the other way round.
    rubric = models.SlugField(max_length=80, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("assignment", args=[self.slug])


def assignment_lock(assignment_id: int) -> None:
    """Queue on one assignment's row until the surrounding transaction ends (PostgreSQL;
    SQLite serialises every write anyway): one cohort judgment or spend at a time.

    FOR NO KEY UPDATE, not FOR UPDATE: a row inserted that references the assignment (an
    upload's Submission; Django's foreign keys are checked at COMMIT) needs KEY SHARE on it,
    which FOR UPDATE blocks and NO KEY UPDATE does not. With FOR UPDATE, an upload committing
    while a cohort judgment held the lock waited for it, while the judgment waited for the
    table generation the upload had moved: a deadlock, and the analysis ended in error.
    """
    Assignment.objects.select_for_update(no_key=True).filter(pk=assignment_id).first()


class SubmissionQuerySet(QuerySet["Submission"]):
    def visible_to(self, user: object) -> SubmissionQuerySet:
        """Hiring leads see every submission; a reviewer sees those assigned to them."""
        if is_hiring_lead(user):
            return self
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(Q(reviewers=user)).distinct()


class Submission(models.Model):
    class Status(models.TextChoices):
        RECEIVED = "received", "Received"
        PROCESSING = "processing", "Processing"
        READY = "ready", "Ready for review"
        REJECTED = "rejected", "Rejected"
        ERROR = "error", "Error"

    class SourceKind(models.TextChoices):
        ARCHIVE = "archive", "Archive"
        BUNDLE = "bundle", "Git bundle"
        REPOSITORY = "repository", "Repository"

    class RefState(models.TextChoices):
        SAME = "same", "Unchanged"
        MOVED = "moved", "Moved on"
        REWRITTEN = "rewritten", "Rewritten"
        FAILED = "failed", "Not checked"

    candidate = models.ForeignKey(Candidate, on_delete=models.PROTECT, related_name="submissions")
    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="submissions")
    archive = models.FileField(upload_to="archives/%Y/%m/", max_length=300)
    archive_name = models.CharField(max_length=300, blank=True)
    archive_sha256 = models.CharField(max_length=64, db_index=True)
    archive_size = models.PositiveBigIntegerField(default=0)
    archive_format = models.CharField(max_length=20, blank=True)
    file_count = models.PositiveIntegerField(default=0)
    unpacked_bytes = models.PositiveBigIntegerField(default=0)
    stub_url = models.URLField(max_length=500, blank=True)
    # Where the hand-in came from. A bundle or a repository is stored as a bundle (the
    # archive above) and judged at one commit; the URL is kept without credentials.
    source_kind = models.CharField(
        max_length=20, choices=SourceKind.choices, default=SourceKind.ARCHIVE
    )
    source_url = models.CharField(max_length=500, blank=True)
    source_ref = models.CharField(max_length=300, blank=True)
    source_commit = models.CharField(max_length=40, blank=True, db_index=True)
    # The judged commit's committer date and subject line: the candidate's to set, shown.
    source_commit_time = models.DateTimeField(null=True, blank=True)
    source_commit_subject = models.CharField(max_length=300, blank=True)
    # *Check again* of a repository's ref: where it points now. Never the judged commit.
    ref_checked_at = models.DateTimeField(null=True, blank=True)
    ref_check_state = models.CharField(max_length=20, choices=RefState.choices, blank=True)
    ref_check_commit = models.CharField(max_length=40, blank=True)
    ref_check_detail = models.TextField(blank=True)
    # The Authorization a private repository was fetched with (its access token), sealed
    # (`submissions.sealed`): opened only to fetch again on *Check again*; never shown.
    source_auth_sealed = models.TextField(blank=True, editable=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RECEIVED)
    status_reason = models.TextField(blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="uploaded_submissions",
    )
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="assigned_submissions"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            # The same archive uploaded twice for one candidate and assignment is one submission.
            # A bundle is one per commit instead: the same file judged at another ref or
            # --before is another hand-in.
            models.UniqueConstraint(
                fields=["candidate", "assignment", "archive_sha256"],
                condition=Q(source_commit=""),
                name="unique_upload",
            ),
            # The same commit handed in twice (two bundles, a bundle and a URL) is one too.
            models.UniqueConstraint(
                fields=["candidate", "assignment", "source_commit"],
                condition=~Q(source_commit=""),
                name="unique_commit",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.candidate} · {self.assignment.slug} · #{self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("submission", args=[self.pk])


class Job(models.Model):
    class Kind(models.TextChoices):
        INTAKE = "intake", "Intake"
        ANALYSIS = "analysis", "Analysis"
        REPLAY = "replay", "Sandboxed replay"
        TRACE = "trace", "Trace verification"
        PROBE = "probe", "Service probe"
        RERECORD = "rerecord", "Re-record comparison"
        REFCHECK = "refcheck", "Check again"
        SPOT_CHECK = "spot_check", "Live spot check"
        RECORD = "record", "Record pass"
        # Used by the test-suite to exercise crashes and timeouts through a real worker.
        SELFTEST = "selftest", "Self-test"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"
        ERROR = "error", "Error"
        TIMED_OUT = "timed_out", "Timed out"

    FINAL_STATES = frozenset({State.PASSED, State.FAILED, State.ERROR, State.TIMED_OUT})

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    step = models.CharField(max_length=100, blank=True)
    log = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    params = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Ended by a fault of ours (a crash in our code, a worker lost for good), not by the
    # hand-in or a part of the environment that is missing: the page says "failed (our error)".
    internal = models.BooleanField(default=False)
    enqueue_error = models.TextField(blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    runner = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [models.Index(fields=["state", "created"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def outcome(self) -> str:
        """How a job ended, in words that never borrow a check's: a job that judged a hand-in
        "finished" whatever its checks found; one that could not judge it says so."""
        if self.state in (self.State.PASSED, self.State.FAILED):
            return "finished"
        if self.state == self.State.TIMED_OUT:
            return "ran out of time"
        if self.state == self.State.ERROR:
            return "failed (our error)" if self.internal else "could not run"
        return self.get_state_display().lower()

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return round((self.finished_at - self.started_at).total_seconds(), 3)
        return None


class CheckResult(models.Model):
    class Status(models.TextChoices):
        PASS = "pass", "Pass"
        FAIL = "fail", "Fail"
        WARN = "warn", "Warn"
        SKIP = "skip", "Skip"
        ERROR = "error", "Error"

    class Cause(models.TextChoices):
        """What made a check end as it did when that was not the hand-in."""

        HAND_IN = "", "The hand-in"
        SANDBOX = "sandbox", "This server's sandbox is not set up"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="checks")
    check_id = models.CharField(max_length=80)
    status = models.CharField(max_length=10, choices=Status.choices)
    summary = models.TextField()
    # A fact, not a phrase in the summary: pages tell a check that could not run on this
    # server (the one banner, the one fix) from one that found something in the hand-in.
    cause = models.CharField(max_length=20, choices=Cause.choices, blank=True, default="")
    evidence = models.JSONField(default=list, blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["check_id"]
        constraints = [
            # Upserted by (submission, check): a redelivered job never duplicates a result.
            models.UniqueConstraint(fields=["submission", "check_id"], name="one_result_per_check")
        ]

    def __str__(self) -> str:
        return f"{self.check_id}: {self.status}"


class Finding(models.Model):
    class Severity(models.TextChoices):
        INFO = "info", "Info"
        WARN = "warn", "Warning"
        ERROR = "error", "Error"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="findings")
    kind = models.CharField(max_length=80)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARN)
    path = models.CharField(max_length=1024, blank=True)
    line = models.PositiveIntegerField(null=True, blank=True)
    message = models.TextField()
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["path", "line", "pk"]
        indexes = [models.Index(fields=["submission", "path", "line"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.path}:{self.line or ''}"


class Blob(models.Model):
    """A body stored once by content hash; small ones inline, large ones in storage."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=200, blank=True)
    is_binary = models.BooleanField(default=False)
    truncated = models.BooleanField(default=False)
    data = models.BinaryField(null=True, blank=True)
    storage_name = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"blob {self.sha256[:12]} ({self.size} bytes)"


class Recording(models.Model):
    """One recording file of a submission: a cassette, fixture, HAR, trace or ledger."""

    class Role(models.TextChoices):
        RECORDING = "recording", "Recording"
        TRACE = "trace", "Trace"
        LEDGER = "ledger", "Ledger"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="recordings")
    path = models.CharField(max_length=1024)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RECORDING)
    format = models.CharField(max_length=40)
    key = models.CharField(max_length=128, blank=True)
    recomputed_key = models.CharField(max_length=128, blank=True)
    model = models.CharField(max_length=200, blank=True)
    recorded_at = models.DateTimeField(null=True, blank=True)
    recorded_at_raw = models.CharField(max_length=100, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    interaction_count = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    # Filled by the replay job: whether the suite read this recording.
    used = models.BooleanField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["path", "pk"]
        indexes = [models.Index(fields=["submission", "path"])]

    def __str__(self) -> str:
        return self.path


class Interaction(models.Model):
    """One request/response of a recording; bodies by blob reference, headers redacted."""

    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="interactions")
    index = models.PositiveIntegerField()
    method = models.CharField(max_length=20, blank=True)
    url = models.TextField(blank=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    request_headers = models.JSONField(default=list, blank=True)
    response_headers = models.JSONField(default=list, blank=True)
    request_blob = models.ForeignKey(
        Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    response_blob = models.ForeignKey(
        Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    recorded_at_raw = models.CharField(max_length=100, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["recording", "index"]

    def __str__(self) -> str:
        return f"{self.recording.path}#{self.index}"


class Turn(models.Model):
    """One step of a rebuilt conversation: what was new in the request, and the response."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="turns")
    thread = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    recording = models.ForeignKey(
        Recording, null=True, blank=True, on_delete=models.CASCADE, related_name="turns"
    )
    interaction_index = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    new_messages = models.JSONField(default=list, blank=True)
    response = models.JSONField(null=True, blank=True)
    usage = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["submission", "thread", "index"]
        # The submission page lists a page of turns in this order.
        indexes = [models.Index(fields=["submission", "thread", "index"])]

    def __str__(self) -> str:
        return f"thread {self.thread} turn {self.index}"


class TraceRow(models.Model):
    """One HTTP hop of a trace file, with its verification result once checked."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="trace_rows")
    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="trace_rows")
    line = models.PositiveIntegerField()
    url = models.TextField(blank=True)
    method = models.CharField(max_length=20, blank=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    request_headers = models.JSONField(default=list, blank=True)
    request_blob = models.ForeignKey(
        Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    response_blob = models.ForeignKey(
        Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verification = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["submission", "recording", "line"]
        # The submission page lists a page of 100,000 rows in this order: no sort of them all.
        indexes = [models.Index(fields=["submission", "recording", "line"])]

    def __str__(self) -> str:
        return f"{self.method} {self.url} ({self.status})"


class ResponseId(models.Model):
    """A response id a provider issued, recorded in one of the submission's recordings
    (`cassettes_app.response_ids`): the fingerprint `cohort.recordings_unique` looks up in
    the other hand-ins of the assignment. Written with the analysis, replaced by the next."""

    # Kept per submission: enough for any honest hand-in, bounded for a hostile one.
    MAX_PER_SUBMISSION = 5000

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="response_ids"
    )
    value = models.CharField(max_length=200)
    path = models.CharField(max_length=1024)  # the first recording that holds it
    kind = models.CharField(max_length=40)  # where it was: body.id, header:request-id, ...

    class Meta:
        ordering = ["path", "pk"]
        constraints = [
            # Led by the value: the index that finds another hand-in holding the same id.
            models.UniqueConstraint(fields=["value", "submission"], name="one_response_id_each")
        ]

    def __str__(self) -> str:
        return f"{self.value} in {self.path}"


class SourceFingerprint(models.Model):
    """One winnowed k-gram fingerprint of a source file of the submission
    (`cassettes_app.fingerprints`): what `cohort.code_similarity` looks up in the other
    hand-ins of the assignment. Written with the analysis, replaced by the next."""

    # Kept per submission: a whole honest project, bounded for a hostile one.
    MAX_PER_SUBMISSION = 100_000

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="source_fingerprints"
    )
    path = models.CharField(max_length=1024)
    hash = models.BigIntegerField()
    # Where the fingerprint was first found in the file (its k-gram's first and last line):
    # the matching span the lead's similarity page shows. 0 for rows stored before lines.
    line = models.PositiveIntegerField(default=0)
    end_line = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["path", "pk"]
        indexes = [
            # Led by the hash: the index that finds another hand-in holding the same one.
            models.Index(fields=["hash", "submission"], name="fingerprint_hash")
        ]

    def __str__(self) -> str:
        return f"{self.hash} in {self.path}"


class Rerecord(models.Model):
    """A reviewer's re-recorded version of a submission's recordings, uploaded as an archive."""

    class Status(models.TextChoices):
        PROCESSING = "processing", "Processing"
        READY = "ready", "Ready"
        REJECTED = "rejected", "Rejected"
        ERROR = "error", "Error"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="rerecords")
    archive = models.FileField(upload_to="rerecords/%Y/%m/", max_length=300)
    archive_name = models.CharField(max_length=300, blank=True)
    archive_sha256 = models.CharField(max_length=64)
    archive_size = models.PositiveBigIntegerField(default=0)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PROCESSING)
    status_reason = models.TextField(blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pair_count = models.PositiveIntegerField(default=0)
    changed_count = models.PositiveIntegerField(default=0)
    only_original = models.PositiveIntegerField(default=0)
    only_rerecorded = models.PositiveIntegerField(default=0)
    # Made by a record pass in the sandbox (not uploaded): its exit, the proxy's exchanges,
    # calls and tokens, and the hand-in's declared cap (see submissions.intake.record_pass).
    record_pass = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "archive_sha256"], name="unique_rerecord_upload"
            )
        ]

    def __str__(self) -> str:
        return f"re-record #{self.pk} of {self.submission_id}"

    def get_absolute_url(self) -> str:
        return reverse("rerecord", args=[self.submission_id, self.pk])


class RerecordPair(models.Model):
    """An original recording file and its re-recorded version, with both sides as turns."""

    rerecord = models.ForeignKey(Rerecord, on_delete=models.CASCADE, related_name="pairs")
    key = models.CharField(max_length=128, blank=True)
    original_path = models.CharField(max_length=1024, blank=True)
    rerecorded_path = models.CharField(max_length=1024, blank=True)
    matched_by = models.CharField(max_length=10, blank=True)  # key | path | "" (one-sided)
    changed = models.BooleanField(default=False)
    first_turn = models.PositiveIntegerField(null=True, blank=True)
    original_turn_count = models.PositiveIntegerField(default=0)
    rerecorded_turn_count = models.PositiveIntegerField(default=0)
    # Turn dicts (new_messages, response, model), redacted; loaded only for one pair's diff.
    original_turns = models.JSONField(default=list, blank=True)
    rerecorded_turns = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-changed", "original_path", "rerecorded_path", "pk"]
        indexes = [models.Index(fields=["rerecord", "changed"])]

    def __str__(self) -> str:
        return self.original_path or self.rerecorded_path


class RunFile(models.Model):
    """A graded output or run log that a replay run wrote, kept so that the evidence naming
    it opens: the submission's tree holds only what was handed in. Text, redacted, capped
    at MAX_BYTES; replaced by the next replay of the submission."""

    MAX_BYTES = 1024 * 1024

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="run_files")
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, related_name="+")
    run = models.PositiveSmallIntegerField()  # 1 or 2: the replay's two runs
    path = models.CharField(max_length=500)
    text = models.TextField(blank=True)
    size = models.PositiveBigIntegerField(default=0)  # of the file as written
    binary = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["path", "run"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "run", "path"], name="one_run_file_per_path"
            )
        ]

    def __str__(self) -> str:
        return f"{self.path} (run {self.run})"

    @property
    def truncated(self) -> bool:
        return self.size > self.MAX_BYTES


class WorkerBeat(models.Model):
    """One worker process's sign of life, published by the worker itself every
    WORKER_BEAT_SECONDS: its host, what its sandbox could not do at start, when last seen.
    The pages read the workers' sandbox from here, not the web host's; the reconciler reads
    which hosts are alive from here, whichever host it runs on."""

    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started = models.DateTimeField(auto_now_add=True)
    seen = models.DateTimeField()
    sandbox_problems = models.JSONField(default=list, blank=True)
    # The worker's pool processes (pids) when it was `seen`: a runner missing here is gone.
    children = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-seen"]
        constraints = [models.UniqueConstraint(fields=["host", "pid"], name="one_beat_per_worker")]
        indexes = [models.Index(fields=["seen"])]

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}"


class SpotSpend(models.Model):
    """One live spot-check call to a team model endpoint: what it spent, for the caps.

    Written before the call (calls=1, tokens = the recorded answer's usage as the estimate)
    under a lock on the assignment row, then corrected to the usage the endpoint reported,
    so two workers checking the same assignment cannot both pass a cap. Holds the endpoint's
    name only, never its key."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="spot_spends")
    submission = models.ForeignKey(
        Submission, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    endpoint = models.CharField(max_length=40)
    calls = models.PositiveIntegerField(default=1)
    tokens = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["assignment", "endpoint", "at"])]

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.calls} call(s), {self.tokens} tokens"


class SpotCheck(models.Model):
    """One live spot check a reviewer asked for: which recordings (chosen, or sampled with
    the seed shown), how many tries, and what each try answered beside the recorded answer.

    The live answers are kept here, beside the hand-in, never over its recordings; redacted,
    with the endpoint's key scrubbed out (an error body may quote it)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        READY = "ready", "Ready"
        ERROR = "error", "Error"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="spot_checks")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    endpoint = models.CharField(max_length=40)
    paths = models.JSONField(default=list, blank=True)  # chosen recordings; empty: sampled
    sample = models.PositiveSmallIntegerField(default=0)  # how many to sample, when none chosen
    seed = models.BigIntegerField(default=0)
    repeats = models.PositiveSmallIntegerField(null=True, blank=True)  # K tries each, all made
    scheduled = models.BooleanField(default=False)  # started by the scheduler, not a person
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    check_status = models.CharField(max_length=10, blank=True)
    summary = models.TextField(blank=True)
    results = models.JSONField(default=list, blank=True)
    calls = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"spot check #{self.pk} of {self.submission_id}"

    def get_absolute_url(self) -> str:
        return reverse("spot_check", args=[self.submission_id, self.pk])
