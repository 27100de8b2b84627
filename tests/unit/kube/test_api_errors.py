"""One error mapping for both API adapters (the cluster's and the leader Lease's): the same
status, message and Retry-After from the same answer."""

from __future__ import annotations

from dataclasses import dataclass, field

from urllib3.exceptions import ReadTimeoutError

from warmgate.kube.cluster import ClusterError
from warmgate.kube.kube_cluster import refused, unanswered
from warmgate.kube.lease_api import LeaseError


@dataclass
class Answer:
    """An HTTP answer as the client hands it on (status, reason, body, headers)."""

    status: int
    reason: str
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def test_a_refusal_keeps_its_status_and_retry_after_in_both_adapters() -> None:
    answer = Answer(429, "Too Many Requests", b'{"message": "slow down"}', {"Retry-After": "3"})
    error = refused(answer)
    assert (error.status, error.retry_after) == (429, 3.0)
    assert "slow down" in str(error)
    assert error.transient
    lease = LeaseError.of(error)
    assert isinstance(lease, ClusterError)
    assert (lease.status, lease.retry_after) == (429, 3.0)
    assert str(lease) == f"the Lease: {error}"


def test_no_answer_is_transient_with_no_status() -> None:
    error = unanswered("GET", "lease", ReadTimeoutError(None, "/", "read timed out"))  # type: ignore[arg-type]
    assert error.status is None
    assert error.transient
    assert str(error).startswith("GET lease: ReadTimeoutError")
