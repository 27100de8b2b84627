"""One warmup run: engine, probe, drafter sweep, verdict, report."""
