"""The pure analysis of one unpacked submission tree.

`analyzer.Analyzer` discovers, parses and checks the recordings; `config` holds the
assignment's settings it takes, `globs` the file patterns, `files` safe file access, `turns`
the compact turn model and its spool, `reports` the per-file report.
"""

from __future__ import annotations

from cassettes_app.analysis.analyzer import Analyzer
from cassettes_app.analysis.globs import glob_match
from cassettes_app.analysis.reports import FileReport
from cassettes_app.analysis.turns import TEXT_CAP, ThreadView, TurnView
from cassettes_app.config import AnalysisConfig

__all__ = [
    "TEXT_CAP",
    "AnalysisConfig",
    "Analyzer",
    "FileReport",
    "ThreadView",
    "TurnView",
    "glob_match",
]
