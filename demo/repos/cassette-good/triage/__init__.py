"""Support-ticket triage agent with a record/replay cassette layer."""
