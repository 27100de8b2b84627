"""The coverage proof: the reachable steps and the shape each one runs, proven over intervals."""
