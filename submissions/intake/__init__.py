"""Intake: upload spooling (`upload`), safe archive extraction (`archive`), unpacked trees
(`trees`), and re-record uploads (`rerecord`)."""
