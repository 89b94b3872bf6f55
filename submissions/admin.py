from __future__ import annotations

from django.contrib import admin

from submissions.models import Assignment, Candidate, CheckResult, Finding, Job, Submission


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
