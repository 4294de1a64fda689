"""Offline benchmark: replay SWE-bench-format traces through arms of the gate and score them."""
