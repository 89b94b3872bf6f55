"""Forms of the reviewing domain."""

from __future__ import annotations

from django import forms

from reviewer.models import Review

SCORE_CHOICES = [("", "—"), ("0", "0"), ("1", "1"), ("2", "2"), ("3", "3")]


class ScoreForm(forms.Form):
    value = forms.TypedChoiceField(
        choices=SCORE_CHOICES, coerce=int, empty_value=None, required=False
    )
    evidence = forms.CharField(required=False, max_length=2000)
    override_reason = forms.CharField(required=False, max_length=2000)
    notes = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Markdown",
    )
    version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    # One token per page load and the page's change counter (set by desk.js; 0 without JS).
    tab = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)
    seq = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)


class RecommendationForm(forms.Form):
    """The reviewer's overall call, autosaved like a row."""

    recommendation = forms.ChoiceField(
        choices=[("", "—"), *Review.Recommendation.choices], required=False
    )
