"""The cluster adapter: the API server through the official client and kopf's login (one error
mapping, the leader Lease included), the runners' status endpoints, the operator's own writes and
watches, and the request metrics named as controller-runtime names them."""
