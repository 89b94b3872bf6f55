from __future__ import annotations

from django.contrib import admin

from submissions.models import (
    Assignment,
    Candidate,
    CheckResult,
    Finding,
    Job,
    SpotSpend,
    Submission,
)


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    search_fields = ["name", "email"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "shape", "rubric"]
    search_fields = ["slug", "title"]


class JobInline(admin.TabularInline):
    model = Job
    extra = 0
    fields = ("kind", "state", "progress", "step", "attempts", "error")
    readonly_fields = fields


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ["pk", "candidate", "assignment", "status", "created"]
    list_filter = ["status", "assignment"]
    search_fields = ["candidate__name", "archive_sha256"]
    filter_horizontal = ["reviewers"]
    readonly_fields = ["archive_sha256", "archive_size", "archive_format", "file_count"]
    inlines = [JobInline]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["pk", "submission", "kind", "state", "attempts", "created"]
    list_filter = ["kind", "state"]


@admin.register(CheckResult)
class CheckResultAdmin(admin.ModelAdmin):
    list_display = ["submission", "check_id", "status"]
    list_filter = ["status", "check_id"]


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ["submission", "kind", "severity", "path", "line"]
    list_filter = ["severity", "kind"]


@admin.register(SpotSpend)
class SpotSpendAdmin(admin.ModelAdmin):
    """The live spot checks' spend ledger, read only: rows are written under the caps' lock."""

    list_display = ["at", "assignment", "endpoint", "submission", "calls", "tokens"]
    list_filter = ["endpoint", "assignment"]
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
