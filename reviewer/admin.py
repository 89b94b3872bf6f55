from __future__ import annotations

from django.contrib import admin

from reviewer.models import Note, Review, RubricRow, RubricTemplate, Score


class RubricRowInline(admin.TabularInline):
    model = RubricRow
    extra = 0


@admin.register(RubricTemplate)
class RubricTemplateAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "builtin"]
    inlines = [RubricRowInline]


class ScoreInline(admin.TabularInline):
    model = Score
    extra = 0


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["submission", "reviewer", "state", "updated"]
    inlines = [ScoreInline]


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ["submission", "author", "created"]
