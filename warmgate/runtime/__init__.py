"""The runtime operator: kopf wiring, the followers, leader election, liveness, metrics, and
the sync's shell (gather -> reconcile.sync.decide -> apply) over the cluster adapter
(`warmgate.kube`)."""
