"""Documentation checks: the entrypoints an assignment asks for, and the replay notes.

Both read the unpacked submission tree and nothing else; nothing is ever executed. One
module per mechanism: `repofiles` (safe, capped reads of the hand-in's files), `makefile`
(a Makefile's targets), `runbook` (a Markdown runbook's steps), `runsh` (the modes run.sh's
argument reaches), `entries` (the entrypoints per shape), `note_fields` (the fields a replay
note names), `harness` (a matcher-based recording library's setup); and one per check id:
`entrypoints` (docs.entrypoints) and `replay_notes` (docs.replay_notes).
"""
