"""Celery tasks of the reviewing side: thin adapters that take ids and call the domain."""

from __future__ import annotations

from celery import shared_task

from reviewer.cohort.table_cache import table_store, tables_store_stale


@shared_task(name="reviewer.tasks.store_comparison_table")
def store_comparison_table(assignment_id: int) -> bool:
    """Render and keep one assignment's comparison table (queued when it changes)."""
    return table_store(assignment_id)


@shared_task(name="reviewer.tasks.store_comparison_tables")
def store_comparison_tables() -> int:
    """Keep every comparison table that is out of date (beat)."""
    return tables_store_stale()
