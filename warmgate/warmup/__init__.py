"""The in-cluster warmup runner (runs inside the vLLM-Gaudi image, standard library only)."""
