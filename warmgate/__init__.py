"""warmgate: prove, warm and gate vLLM spec-decode shapes on Intel Gaudi."""

__version__ = "0.1.0"
