"""Tests of the submissions app."""
