"""The reconcile decisions, pure: plan evaluation, warmup and serving state machines, status."""
