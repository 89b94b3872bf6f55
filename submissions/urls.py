from __future__ import annotations

from django.urls import path

from submissions import views

urlpatterns = [
    path("assignments/new/", views.assignment_new, name="assignment_new"),
]
