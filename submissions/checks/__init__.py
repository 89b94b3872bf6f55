"""The checks computed from runs, one function per catalog id (`cassettes_app.checks.catalog`),
and `store`, which writes any check's outcome as a CheckResult row."""
