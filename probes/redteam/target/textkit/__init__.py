"""textkit: small text helpers used by the cascade red-team suite as its target repository."""

__version__ = "0.4.0"
