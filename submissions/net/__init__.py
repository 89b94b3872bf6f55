"""Outbound HTTP to candidates' stubs: the guard that refuses private addresses (`outbound`)."""
