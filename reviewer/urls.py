from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from reviewer import views
from reviewer.auth import ThrottledLoginView

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission"),
    path("submissions/<int:pk>/scores/<int:row_id>/", views.score_update, name="score_update"),
    path("submissions/<int:pk>/review/submit/", views.review_submit_view, name="review_submit"),
    path("submissions/<int:pk>/diff/", views.turn_diff, name="turn_diff"),
    path("submissions/<int:pk>/rerecords/", views.rerecord_upload, name="rerecord_upload"),
    path("submissions/<int:pk>/rerecords/<int:rid>/", views.rerecord_detail, name="rerecord"),
    path("assignments/<slug:slug>/compare/", views.comparison, name="comparison"),
    path("", include("submissions.urls")),
    # After the include: "assignments/new/" must win over the slug pattern.
    path("assignments/<slug:slug>/", views.assignment_detail, name="assignment"),
    path("admin/", admin.site.urls),
]
