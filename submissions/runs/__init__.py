"""One thin handler per job kind: load what the job needs, call the domain, store results.

`submissions.jobs.registry` maps each kind to its handler here.
"""
