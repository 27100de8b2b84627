"""The planning of a reconcile, pure: spec -> bucket plan, proof, completion, cost and drafter
sweep, with the planning verdicts; shared by objects with the same inputs (`planning_cache`)."""
