"""Loopback stub servers and a connect guard for the outbound and trace-verification tests."""
