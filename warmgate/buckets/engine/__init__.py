"""vllm-gaudi's bucketing, ported exactly: shape config, ranges, bucket lists, runtime lookups."""
