"""The reconcile, pure: the planning (`planning/`) and the decisions of a sync (`sync/`)."""
