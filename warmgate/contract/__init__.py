"""The shared contract: the documents the operator and the runner exchange, one frozen type each
with its one reader (warmup order, drafter sweep, direct drafter warmup, shard, termination
summary, status board). Standard library only, importing nothing of warmgate but itself: the
init container copies it into the engine's image beside the runner (docs/architecture.md)."""
