"""Tests of the reviewer app."""
