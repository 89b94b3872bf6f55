from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, register_converter

from reviewer.auth import ThrottledLoginView
from reviewer.views import (
    assignment,
    calibration,
    comparison,
    diff,
    files,
    formats,
    home,
    pairwise,
    share,
    similarity,
    submission,
)


class AssignmentSlug:
    """An assignment's slug in a URL: any slug but the reserved word `new`, so that
    `assignments/new/` and `assignments/<slug>/` never depend on their order."""

    regex = r"(?!new/)[-a-zA-Z0-9_]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(AssignmentSlug, "assignment")

urlpatterns = [
    path("", home.home, name="home"),
    path("formats/", formats.formats, name="formats"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("assignments/new/", assignment.assignment_new, name="assignment_new"),
    path("assignments/<assignment:slug>/", assignment.assignment_detail, name="assignment"),
    path("assignments/<assignment:slug>/compare/", comparison.comparison, name="comparison"),
    path("assignments/<assignment:slug>/compare/pair/", pairwise.pairwise, name="pairwise"),
    path(
        "assignments/<assignment:slug>/calibration/",
        calibration.assignment_calibration,
        name="calibration",
    ),
    path("assignments/<assignment:slug>/similarity/", similarity.similarity, name="similarity"),
    path("assignments/<assignment:slug>/report.html", share.cohort_report, name="cohort_report"),
    path("calibration/", calibration.reviewers_calibration, name="reviewers_calibration"),
    path("submissions/<int:pk>/", submission.submission_detail, name="submission"),
    path("submissions/<int:pk>/scores/<int:row_id>/", submission.score_update, name="score_update"),
    path(
        "submissions/<int:pk>/review/submit/", submission.review_submit_view, name="review_submit"
    ),
    path("submissions/<int:pk>/review/start/", submission.review_start, name="review_start"),
    path(
        "submissions/<int:pk>/review/recommendation/",
        submission.recommendation_update,
        name="review_recommend",
    ),
    path("submissions/<int:pk>/rerun/", submission.jobs_rerun, name="jobs_rerun"),
    path("submissions/<int:pk>/check-again/", submission.ref_check_view, name="ref_check"),
    path("submissions/<int:pk>/forget-token/", submission.token_forget_view, name="token_forget"),
    path("submissions/<int:pk>/pins/", submission.note_pin_view, name="note_pin"),
    path("submissions/<int:pk>/diff/", diff.turn_diff, name="turn_diff"),
    path("submissions/<int:pk>/file/", files.submission_file, name="submission_file"),
    path("submissions/<int:pk>/report.html", share.submission_report, name="submission_report"),
    path("submissions/<int:pk>/rerecords/", diff.rerecord_upload, name="rerecord_upload"),
    path("submissions/<int:pk>/rerecords/<int:rid>/", diff.rerecord_detail, name="rerecord"),
    path("submissions/<int:pk>/spot-checks/", diff.spot_check_start, name="spot_check_start"),
    path("submissions/<int:pk>/spot-checks/<int:sid>/", diff.spot_check_detail, name="spot_check"),
    path("submissions/<int:pk>/record-pass/", diff.record_pass_start, name="record_pass_start"),
    path("admin/", admin.site.urls),
]
