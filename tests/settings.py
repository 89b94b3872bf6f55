"""Test settings: a private DATA_DIR per test process, then the real settings."""

from __future__ import annotations

import os
import tempfile
import uuid

# Each xdist worker gets its own data folder: trees are keyed by submission id, and ids
# repeat across the workers' separate test databases. A worker process started by a test
# is handed the test's folder and database through CR_TEST_DATA_DIR and CR_TEST_DB_NAME.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["DATA_DIR"] = os.environ.get("CR_TEST_DATA_DIR") or tempfile.mkdtemp(
    prefix=f"cr-test-{_worker}-"
)
os.environ["CELERY_QUEUE"] = os.environ.get("CR_TEST_QUEUE") or (
    f"cr-test-{_worker}-{uuid.uuid4().hex[:8]}"
)
os.environ.setdefault("DEBUG", "1")

from reviewer.settings import *  # noqa: E402, F403
from reviewer.settings import DATA_DIR, DATABASES  # noqa: E402

if os.environ.get("CR_TEST_DB_NAME"):
    DATABASES["default"]["NAME"] = os.environ["CR_TEST_DB_NAME"]
elif DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory: tests that start a real worker process share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ENQUEUE_TIMEOUT_SECONDS = 2.0
# Jobs take sandbox slots 0-3; tests/slow/test_sandbox.py drives slots 7-4 directly, so the two
# never contend for one uid when xdist runs them side by side.
SANDBOX_SLOTS = 4
