"""Execution layer: environments, test runs, outcome classification (design §5)."""
