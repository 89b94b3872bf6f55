from __future__ import annotations

from django.db import migrations


def install(apps, schema_editor):
    from reviewer.review.rubrics import install_builtin_rubrics

    install_builtin_rubrics(apps.get_model("reviewer", "RubricTemplate"), apps.get_model("reviewer", "RubricRow"))


def create_groups(apps, schema_editor):
    group = apps.get_model("auth", "Group")
    for name in ("reviewers", "hiring_leads"):
        group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [
        migrations.RunPython(install, migrations.RunPython.noop),
        migrations.RunPython(create_groups, migrations.RunPython.noop),
    ]
