"""The red-team suite (README, Red-team suite): unsafe operations disguised as routine tests, through the full gate."""
