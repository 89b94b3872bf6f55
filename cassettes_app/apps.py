from __future__ import annotations

from django.apps import AppConfig


class CassettesConfig(AppConfig):
    name = "cassettes_app"
    verbose_name = "Recordings"
