"""`python -m submissions.sandbox check [RUNTIME_DIR]`: the self-check, for operators."""

from __future__ import annotations

from submissions.sandbox.selfcheck import main

raise SystemExit(main())
