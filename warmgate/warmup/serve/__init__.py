"""Serve mode: the serving engine under the runner, its output counted for unwarmed shapes."""
