"""The decisions of one sync, pure: what to read (`reads`), the snapshot (`observed`), the
warmup and serving verdicts, the actions and the status (`decide`, `status_builder`)."""
