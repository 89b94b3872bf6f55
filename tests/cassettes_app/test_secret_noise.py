"""Session and analytics cookies in real cassettes are their own low-severity kind."""

from __future__ import annotations

from cassettes_app.checks.cassettes import cassettes_no_secrets
from cassettes_app.formats import parse_file
from cassettes_app.secrets import SESSION_COOKIE, scan_headers, scan_text
from tests.paths import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild"
REAL_KEY = "sk-proj-Xk3Jd9sKq2LmPz8RtYvB4nW7cF1gH6eA0uIoQwErTyUiOpAsDfGh"


def test_edge_cookies_are_session_cookies_and_a_login_cookie_stays_a_credential() -> None:
    hits = scan_headers(
        [
            (
                "set-cookie",
                "__cf_bm=PoMWCL_iwiPZatxbVmgOIHz_yEW8xd5hjuNvRD5rfWA-1750880065; path=/",
            ),
            (
                "set-cookie",
                "_cfuvid=Xk3Jd9sKq2LmPz8RtYvB4nW7cF1gH6eA0uI-1750880065123-0.0.1.1; path=/",
            ),
            ("set-cookie", "session_token=Zk3Jd9sKq2LmPz8RtYvB4nW7cF1gH6eA0uIoQwEr; path=/"),
        ],
        "c.yaml",
        where="response",
    )
    rules = [(h.rule, h.context) for h in hits]
    assert rules[:2] == [
        (SESSION_COOKIE, "response header set-cookie (__cf_bm)"),
        (SESSION_COOKIE, "response header set-cookie (_cfuvid)"),
    ]
    assert rules[2][0] == "credential-header"
    assert all("PoMWCL_iwiPZatxbVmgOIHz" not in h.redacted for h in hits)  # still never in full


def test_a_cassette_with_only_edge_cookies_passes_and_says_what_it_kept() -> None:
    rel = "vcrpy-aiohttp/dd-apm-test-agent-openai-chat-completion.yaml"
    data = (WILD / rel).read_bytes()
    assert b"__cf_bm=" in data  # the real file carries Cloudflare's cookies
    result = parse_file(rel, data)
    hits = []
    for recording in result.recordings:
        for i in recording.interactions:
            hits += scan_headers(i.response_headers, rel, where="response")
            hits += scan_headers(i.request_headers, rel, where="request")
    outcome = cassettes_no_secrets(hits)
    assert outcome.status == "pass", outcome.summary
    assert "session cookie" in outcome.summary and "__cf_bm" in outcome.summary
    assert all("PoMWCL" not in str(e) for e in outcome.evidence)


def test_a_real_key_beside_session_cookies_still_fails() -> None:
    hits = scan_text(
        f"Authorization: Bearer {REAL_KEY}\nSet-Cookie: __cf_bm=PoMWCL_iwiPZatxbVmgOIHz_yEW8xd5",
        "c.txt",
    )
    outcome = cassettes_no_secrets(hits)
    assert outcome.status == "fail" and outcome.summary.startswith("1 credential")
    assert REAL_KEY not in str(outcome.evidence)


def test_test_suites_stand_in_keys_are_placeholders_a_real_looking_one_is_not() -> None:
    from cassettes_app.secrets import is_placeholder

    assert is_placeholder("AKIATESTKEY1234567890")
    assert is_placeholder("AKIAFAKEACCESSKEY123")
    assert is_placeholder("FAKE-OPENAI-TOKEN")
    assert not is_placeholder("AKIA5QZJ7XN2LWPR3KHD")


def _analyse(root):
    import datetime as dt

    from cassettes_app.analysis import AnalysisConfig, Analyzer

    config = AnalysisConfig(
        shape="cassette",
        recording_globs=("rec/**/*",),
        volatile_fields=(),
        stale_after_days=42,
        expected_model=None,
        now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    )
    analyzer = Analyzer(root, config)
    for _ in analyzer.files():
        pass
    hits = list(analyzer.secret_hits())
    return hits, {o.id: o for o in analyzer.checks()}


def test_the_whole_wild_corpus_holds_no_false_credential(tmp_path) -> None:
    import shutil

    shutil.copytree(WILD, tmp_path / "rec")
    hits, checks = _analyse(tmp_path)
    leaks = [(h.rule, h.path, h.context) for h in hits if h.status == "leak"]
    assert [x for x in leaks if x[0] != SESSION_COOKIE] == []
    # Edge, analytics and anti-forgery cookies of several HAR files, Polly and VCR files.
    assert len({path for _, path, _ in leaks}) >= 5
    assert checks["cassettes.no_secrets"].status == "pass"
    # ... and a live-looking key planted beside them is caught, never shown in full.
    (tmp_path / "rec" / "planted.txt").write_text(f"OPENAI_API_KEY={REAL_KEY}\n")
    hits, checks = _analyse(tmp_path)
    outcome = checks["cassettes.no_secrets"]
    assert outcome.status == "fail" and outcome.summary.startswith("1 credential")
    assert REAL_KEY not in str(outcome.evidence) + outcome.summary


def test_script_code_naming_cookie_is_not_a_cookie() -> None:
    text = 'if(!(d&&d!=M))document.cookie = a.get("x") ; cookie: if(!(d d!=M'
    assert [h for h in scan_text(text, "page.js") if h.status == "leak"] == []


def test_an_environment_variables_name_in_place_of_a_key_is_a_placeholder() -> None:
    url = "https://ws.audioscrobbler.com/2.0/?method=artist.getCorrection&api_key="
    hits = scan_text(url + "LAST_FM_API_KEY&format=json", "c.json")
    assert hits and all(h.status == "redacted" for h in hits)
    live = scan_text(url + "b25b959554ed76058ac220b7b2e0a026&format=json", "c.json")
    assert [h.status for h in live] == ["leak"]
