"""A host's unpacked trees are a cache bounded by bytes: the least recently used go first,
never one a job may be reading, and a tree gone is unpacked again from storage."""

from __future__ import annotations

import io
import os
import time
from unittest import mock

import pytest

from submissions.intake.trees import submission_tree, tree_in_use, tree_path, trees_evict
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from tests.conftest import make_zip


@pytest.fixture
def upload(assignment, candidate, settings, tmp_path):
    settings.WORK_DIR, settings.MEDIA_ROOT = tmp_path / "work", tmp_path / "media"

    def create(text: str):
        data = make_zip({"README.md": text, "big.txt": os.urandom(40_000).hex()})
        with mock.patch.object(queue, "job_enqueue", return_value=True):
            return submission_create(
                upload=io.BytesIO(data), filename="r.zip", candidate=candidate,
                assignment=assignment,
            ).submission  # fmt: skip

    return create


def _age(submission, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(tree_path(submission).parent, (then, then))


def test_the_least_recently_used_trees_go_when_over_the_cap(upload, settings) -> None:
    settings.TREE_CACHE_BYTES = 200_000  # room for two trees of ~80 kB, not three
    first, second = upload("one"), upload("two")
    _age(first, 3000)
    _age(second, 2000)
    submission_tree(first)  # used again: now the most recent of the two
    _age(first, 1500)
    third = upload("three")
    assert tree_path(first).is_dir() and tree_path(third).is_dir()
    assert not tree_path(second).exists()  # the least recently used went
    # A tree gone is unpacked again from storage when a job asks for it.
    assert (submission_tree(second) / "README.md").read_text() == "two"


def test_a_tree_a_job_holds_is_never_removed(upload, settings) -> None:
    settings.TREE_CACHE_BYTES = 2**20
    trees = [upload(str(n)) for n in range(3)]
    settings.TREE_CACHE_BYTES = 1  # every tree is over the cap now
    with tree_in_use(trees[1].pk):  # a job on this host is reading this one
        gone = trees_evict()
    assert gone == [tree_path(trees[0]).parent, tree_path(trees[2]).parent]
    assert [tree_path(s).is_dir() for s in trees] == [False, True, False]
    assert trees_evict() == [tree_path(trees[1]).parent]  # the job ended


def test_a_job_holds_its_tree_while_it_runs(upload, settings) -> None:
    """The engine takes the hold around every handler: an eviction meanwhile skips it."""
    from submissions.jobs import engine
    from submissions.jobs.inline import jobs_run_inline

    settings.TREE_CACHE_BYTES = 1
    s = upload("held")
    seen = []

    def handler(job, progress):
        seen.append((submission_tree(job.submission), trees_evict()))

    with mock.patch.dict(engine.HANDLERS, {kind: handler for kind in engine.HANDLERS}):
        jobs_run_inline(submission=s)
    assert seen and all(tree.is_dir() and gone == [] for tree, gone in seen)
