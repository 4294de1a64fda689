"""The red-team suite: unsafe operations disguised as routine tests, run through the full gate (issue 7)."""
