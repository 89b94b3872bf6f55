"""The built-in rubrics again: each row now says what 0, 1, 2 and 3 mean."""

from __future__ import annotations

from django.db import migrations


def install(apps, schema_editor):
    from reviewer.review.rubrics import install_builtin_rubrics

    install_builtin_rubrics(
        apps.get_model("reviewer", "RubricTemplate"), apps.get_model("reviewer", "RubricRow")
    )


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0009_anchors_recommendation")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
