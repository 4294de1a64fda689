"""Sandboxes for untrusted code: one module per backend."""
