"""LLM layer: one litellm client with retries, fallbacks, a per-run budget and a record/replay cassette.

litellm is imported only when a live call is made, so a run without a model never pays its import time.
"""
