"""S3-compatible storage, against a real S3 server this test starts (moto's server mode on a
free loopback port): settings from the S3_* variables, a hand-in stored and analysed through
it, and the file viewer reading a member from the bucket on a host with an empty WORK_DIR."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
import yaml
from django.urls import reverse

from reviewer.env import Env, default_storage_setting
from reviewer.ops.demo import DEMO_DIR
from submissions.assignments import assignment_values
from tests.conftest import ingest_inline
from tests.hosts import S3_KEYS, s3_server

pytestmark = pytest.mark.s3

BUCKET = "handins"
KEYS = S3_KEYS


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory) -> Iterator[str]:
    """A moto S3 server in its own process on a free port; stopped after the module."""
    with s3_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture
def s3_storage(s3_endpoint, settings, tmp_path):
    """STORAGES["default"] as the real settings build it from S3_* variables, on a fresh
    bucket; nothing of the hand-in is kept on the local disk but the per-host caches."""
    import boto3

    client = boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1",
        aws_access_key_id=KEYS["S3_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["S3_SECRET_ACCESS_KEY"],
    )  # fmt: skip
    bucket = f"{BUCKET}-{tmp_path.name.lower().replace('_', '-')[-30:]}"
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": default_storage_setting(
            Env({"STORAGE_BACKEND": "s3", "S3_BUCKET": bucket, "S3_ENDPOINT_URL": s3_endpoint,
                 "S3_REGION": "us-east-1", "S3_ADDRESSING_STYLE": "path", **KEYS})
        ),
    }  # fmt: skip
    settings.MEDIA_ROOT = tmp_path / "media-unused"
    settings.WORK_DIR = tmp_path / "work"
    settings.ARCHIVE_CACHE_DIR = tmp_path / "archive-cache"
    return client, bucket


def _keys(client, bucket: str) -> list[str]:
    listing = client.list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_the_storage_api_writes_and_reads_the_bucket(s3_storage) -> None:
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    client, bucket = s3_storage
    name = default_storage.save("probe/hello.txt", ContentFile(b"hello"))
    assert _keys(client, bucket) == [name]
    with default_storage.open(name, "rb") as handle:
        assert handle.read() == b"hello"
    # Names are never overwritten: a second save of the same name gets its own object.
    again = default_storage.save("probe/hello.txt", ContentFile(b"other"))
    assert again != name and len(_keys(client, bucket)) == 2


def test_a_hand_in_is_stored_analysed_and_viewed_from_s3(
    s3_storage, settings, client, reviewer
) -> None:
    from submissions.intake.trees import submission_tree
    from submissions.models import CheckResult

    s3, bucket = s3_storage
    data = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    cassette = {
        "key": "k1",
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        # Over the inline limit: this body goes to the bucket as a blob.
        "response": {"choices": [{"message": {"content": "lorem ipsum " * 7000}}]},
        "recorded_at": "2026-11-20T09:00:00Z",
        "model": "m",
    }
    repo = {"cassettes/k1.json": json.dumps(cassette, indent=2), "README.md": "hello\nworld\n"}
    s, _ = ingest_inline(repo, assignment_values({**data, "replay_command": ""}))
    assert s.status not in ("rejected", "error"), s.status_reason
    keys = _keys(s3, bucket)
    assert s.archive.name in keys  # the archive itself lives in the bucket
    assert any(key.startswith("blobs/") for key in keys)  # and the large body
    assert s.recordings.filter(path="cassettes/k1.json").exists()
    assert not settings.MEDIA_ROOT.exists()  # nothing went to a local media folder

    # A web host that never unpacked it: the viewer reads the member from the bucket.
    shutil.rmtree(settings.WORK_DIR)
    CheckResult.objects.create(
        submission=s, check_id="replay.no_network_attempts", status="fail",
        summary="seen at README.md:2",
    )  # fmt: skip
    s.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[s.pk])
    shown = client.get(url, {"path": "README.md", "line": "2"})
    assert shown.status_code == 200
    assert '<tr id="L2" class="lit">' in shown.content.decode()
    page = client.get(s.get_absolute_url()).content.decode()
    assert f'href="{url}?path=README.md&amp;line=2#L2"' in page
    assert not settings.WORK_DIR.exists()  # no tree unpacked to show it
    assert [p.name for p in settings.ARCHIVE_CACHE_DIR.iterdir()] == [s.archive_sha256]
    missing = client.get(url, {"path": "nope.txt"})
    assert missing.status_code == 404 and "no such file" in missing.content.decode()

    # A worker host unpacks the tree again from the bucket.
    assert (submission_tree(s) / "README.md").read_text() == "hello\nworld\n"
