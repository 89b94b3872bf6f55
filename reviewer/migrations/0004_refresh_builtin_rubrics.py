"""The built-in rubrics again: rows now cite only checks that apply to their shape."""

from __future__ import annotations

from django.db import migrations


def install(apps, schema_editor):
    from reviewer.review.rubrics import install_builtin_rubrics

    install_builtin_rubrics(
        apps.get_model("reviewer", "RubricTemplate"), apps.get_model("reviewer", "RubricRow")
    )


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0003_cache_table")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
