"""A real single-node Kubernetes cluster on this machine, for the e2e tier and `make run`."""
