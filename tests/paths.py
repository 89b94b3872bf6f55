"""Where the tests find the project and its sample files, wherever a test module sits."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "recordings"
DEMO_REPOS = ROOT / "demo" / "repos"
