"""Runnable jobs and the ``streamjoin`` command line."""
