"""Tests of the cassettes_app app."""
