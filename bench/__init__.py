"""Benchmarks, run by ``streamjoin bench NAME`` (never by the test suite)."""
