import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import answer  # noqa: E402


def test_answers_have_labels(tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    answer.main("replay")
    with open("out/answers.json") as f:
        result = json.load(f)
    labels = [a["label"] for a in result["answers"]]
    assert labels == ["billing", "bug", "feature", "praise", "question"]
    assert sorted(result["labels_seen"]) == sorted(set(labels))


def test_fixture_path_is_stable():
    assert answer.fixture_path("hello") == answer.fixture_path("hello")
    assert answer.fixture_path("hello").endswith(".json")
