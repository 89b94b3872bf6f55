"""Jobs: the Job row is the source of truth, the broker only carries ids.

State machine: queued → running → passed | failed | error | timed_out. A task that finds its
job in any other state does nothing, so a redelivered message never runs a job twice. A job
whose worker died (SIGKILL, OOM, hard time limit) is taken over by the redelivered message
or by the reconciler, and counted as an attempt; after `max_attempts` it ends `error`.

Modules, lowest first: `types` (what a handler sees and returns), `state` (transitions and
settling the submission), `queue` (create, publish, reconcile), `registry` (kind → handler,
the handlers live in `submissions.runs`), `engine` (claim, execute, finish).
"""
