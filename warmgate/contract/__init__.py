"""The documents the operator and the runner exchange, with their validation."""
