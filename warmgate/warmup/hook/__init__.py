"""The compile hook: a vLLM plugin inside the engine that counts graph compilations."""
