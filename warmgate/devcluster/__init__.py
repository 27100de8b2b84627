"""Dev and test infrastructure, apart from the runtime: the real control plane (etcd +
kube-apiserver) and a real single-node Kubernetes cluster on this machine, for the integration and
e2e tiers and `make run`. The operator never imports it."""
