"""Pure bucket math: an exact port of vllm-gaudi shape bucketing (no kopf, no kubernetes)."""
