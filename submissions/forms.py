"""Forms for uploads and assignments."""

from __future__ import annotations

from django import forms
from django.conf import settings

from submissions.assignments import PRESETS
from submissions.models import Assignment, Recording, Submission


def _archive_checked(archive):
    """An uploaded archive within the upload limit and not empty."""
    limit = settings.INTAKE_MAX_UPLOAD_BYTES
    if archive.size > limit:
        raise forms.ValidationError(
            f"The archive is {archive.size} bytes; the limit is {limit} bytes."
        )
    if archive.size == 0:
        raise forms.ValidationError("The archive is empty (0 bytes).")
    return archive


class RerecordForm(forms.Form):
    archive = forms.FileField(
        label="Re-recorded recordings",
        help_text="An archive (zip or tar) of the same repository with its recordings made "
        "again; each is paired with the original by key, or by path.",
    )

    def clean_archive(self):
        return _archive_checked(self.cleaned_data["archive"])


class UploadForm(forms.Form):
    candidate = forms.CharField(
        max_length=200, help_text="An existing candidate's name, or a new one to add."
    )
    archive = forms.FileField(
        required=False,
        label="Archive or git bundle",
        help_text="zip, tar, tar.gz, tar.bz2 or tar.xz, or a git bundle (judged at its HEAD)",
    )
    repository_url = forms.CharField(
        required=False,
        max_length=500,
        label="Or a repository URL",
        help_text="https://… of a git repository: fetched now and judged at the commit its "
        "ref names (a later push does not change what is judged).",
    )
    ref = forms.CharField(
        required=False,
        max_length=300,
        label="Branch or tag",
        help_text="The branch or tag to judge (default: HEAD).",
    )
    token = forms.CharField(
        required=False,
        max_length=500,
        label="Access token",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text=("For a private repository: kept encrypted for Check again, never shown again."),
    )
    stub_url = forms.URLField(
        required=False,
        label="Stub URL",
        max_length=500,
        assume_scheme="https",
        help_text="The candidate's live shop stub, if the assignment has traces.",
    )

    def clean_candidate(self) -> str:
        name = " ".join(self.cleaned_data["candidate"].split())
        if not name:
            raise forms.ValidationError("Name the candidate.")
        return name

    def clean_archive(self):
        archive = self.cleaned_data.get("archive")
        return _archive_checked(archive) if archive else None

    def clean_repository_url(self) -> str:
        url = self.cleaned_data.get("repository_url", "").strip()
        if url and not url.startswith(("http://", "https://")):
            raise forms.ValidationError("The repository URL must start with https://.")
        return url

    def clean(self):
        data = super().clean()
        has_archive = bool(data.get("archive"))
        has_url = bool(data.get("repository_url"))
        if has_archive == has_url and not self.errors:
            raise forms.ValidationError(
                "Give either an archive or bundle file, or a repository URL (one of them)."
            )
        return data

    def clean_stub_url(self) -> str:
        url = self.cleaned_data.get("stub_url", "")
        if url and not url.startswith(("http://", "https://")):
            raise forms.ValidationError("The stub URL must start with http:// or https://.")
        return url


class AssignmentForm(forms.ModelForm):
    shape = forms.ChoiceField(choices=[(k, k) for k in PRESETS])

    class Meta:
        model = Assignment
        fields = ["slug", "title", "shape", "replay_command", "expected_model", "stale_after_days"]
        labels = {
            "slug": "Slug (in URLs and YAML)",
            "replay_command": "Replay command",
            "expected_model": "Expected model",
            "stale_after_days": "Stale after (days)",
        }


class SpotCheckForm(forms.Form):
    """What a reviewer re-asks live: chosen recordings, or a seeded sample; K repeats."""

    endpoint = forms.ChoiceField(label="Endpoint")
    recordings = forms.MultipleChoiceField(
        label="Recordings", required=False, widget=forms.CheckboxSelectMultiple
    )
    sample = forms.IntegerField(
        label="or sample", min_value=0, max_value=10, required=False, initial=3
    )
    seed = forms.IntegerField(label="seed", required=False, min_value=0, max_value=2**62)
    repeats = forms.IntegerField(
        label="repeats (K)", min_value=1, max_value=10, required=False,
        help_text="every recording asked K times, to tell model variance from a recorded "
        "answer no try reproduces; empty: up to 3 tries, stopping at the first that reproduces",
    )  # fmt: skip

    def __init__(self, *args, endpoints=(), paths=(), seed=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].choices = [(e.name, f"{e.name} ({e.api})") for e in endpoints]
        self.fields["recordings"].choices = [(p, p) for p in paths]
        self.fields["seed"].initial = seed

    def clean(self):
        data = super().clean()
        if not data.get("recordings") and not data.get("sample"):
            raise forms.ValidationError("Pick recordings, or a sample of 1 to 10.")
        return data


MAX_SPOT_PATHS = 200  # recordings offered as checkboxes


def spot_check_form(submission: Submission, data: object = None) -> SpotCheckForm:
    """A submission's spot-check form: its recordings, the endpoints, the seed shown."""
    paths = (
        Recording.objects.filter(submission=submission, role=Recording.Role.RECORDING)
        .order_by("path")
        .values_list("path", flat=True)
        .distinct()[:MAX_SPOT_PATHS]
    )
    return SpotCheckForm(
        data, endpoints=settings.SPOT_CHECK_ENDPOINTS, paths=list(paths), seed=submission.pk
    )
