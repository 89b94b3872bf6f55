from __future__ import annotations

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    # The database cache (login throttling) needs its table; `migrate` alone must be enough.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0002_builtin_rubrics")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
