"""Outbound HTTP to candidates' stubs: the guard that refuses private addresses (`outbound`)
and the stub client every trace check opens (`stub`)."""
