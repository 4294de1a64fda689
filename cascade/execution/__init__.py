"""Execution layer: environments, test runs, outcome classification."""
