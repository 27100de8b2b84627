"""Shared test support: example loaders, Kubernetes object builders and the fake cluster.

Importable as `support` from every test (pytest's `pythonpath = ["tests", ...]`).
"""
