"""cascade: a gate that accepts, rejects or leaves uncertain a patch written by a coding agent."""

__version__ = "0.1.0"
