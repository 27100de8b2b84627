"""Differential test: the apiserver and warmgate.api.parse_manifest accept the same specs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.bad_manifests import base_manifest, merge_patch

from warmgate.api import ManifestError, parse_manifest
from warmgate.api.constants import GROUP, PLURAL, VERSION
from warmgate.devcluster.controlplane import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(control_plane: ControlPlane, module_namespace: str) -> tuple[Any, str]:
    """A CustomObjectsApi on the real apiserver with the CRD installed, and a namespace."""
    from kubernetes import client

    return client.CustomObjectsApi(control_plane.api_client()), module_namespace


# Values straddle each bound and rule, so both sides see valid and invalid neighbours.
ENGINE = st.fixed_dictionaries(
    {},
    optional={
        "maxNumSeqs": st.sampled_from([128, 1, 64, 256, 2048, 0, 4096]),
        "maxNumBatchedTokens": st.sampled_from([8192, 2048, 256, 128, 64, 16]),
        "blockSize": st.sampled_from([128, 64, 256, 100]),
        "maxModelLen": st.sampled_from([8192, 128, 64]),
        "extraArgs": st.lists(
            st.sampled_from(
                ["--kv-cache-dtype=fp8_inc", "--enforce-eager", "--max_num_seqs=8", "--port"]
            ),
            max_size=2,
        ),
    },
)
NGRAM = st.fixed_dictionaries(
    {}, optional={"promptLookupMin": st.integers(0, 6), "promptLookupMax": st.integers(1, 6)}
)
SPECULATIVE = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["eagle3", "ngram", "mtp", "eagle", "medusa"]),
        "numSpeculativeTokens": st.sampled_from([2, 1, 3, 16, 0, 17]),
        "draftModel": st.one_of(st.just({"name": "draft/head"}), st.none()),
        "ngram": st.one_of(st.none(), st.none(), NGRAM),
    }
)
RANGE = st.fixed_dictionaries(
    {},
    optional={
        "min": st.sampled_from([0, 1, 64, 4096]),
        "step": st.sampled_from([0, 1, 32]),
        "max": st.sampled_from([1, 1024, 4096]),
        "padMax": st.just(8),
    },
)
SEED = st.one_of(
    st.tuples(st.integers(1, 64), st.sampled_from([1, 2, 128]), st.integers(0, 256)).map(list),
    st.lists(st.integers(-1, 4096), min_size=2, max_size=4),
)
BUCKETS = st.fixed_dictionaries(
    {},
    optional={
        "strategy": st.sampled_from(["exp", "lin", "pad"]),
        "prompt": st.fixed_dictionaries({}, optional={"bs": RANGE, "query": RANGE}),
        "decode": st.fixed_dictionaries({}, optional={"block": RANGE}),
        "seeds": st.fixed_dictionaries(
            {"prompt": st.lists(SEED, max_size=2), "decode": st.lists(SEED, max_size=2)}
        ),
    },
)
WARMUP = st.fixed_dictionaries(
    {},
    optional={
        "resources": st.fixed_dictionaries(
            {"limits": st.fixed_dictionaries({"habana.ai/gaudi": st.sampled_from([1, 2, "1"])})}
        ),
        "cache": st.fixed_dictionaries(
            {},
            optional={
                "existingClaim": st.just("cache"),
                "claimTemplate": st.fixed_dictionaries({"size": st.sampled_from(["1Gi", "100Gi"])}),
                "maxSizeMB": st.sampled_from([64, 8192, 204800]),
            },
        ),
    },
)
SPEC_PATCH = st.fixed_dictionaries(
    {"engine": ENGINE, "speculative": SPECULATIVE},
    optional={"buckets": BUCKETS, "warmup": WARMUP},
)


def _server_accepts(server: tuple[Any, str], manifest: dict[str, Any]) -> tuple[bool, str]:
    from kubernetes import client

    api, namespace = server
    try:
        api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, manifest, dry_run="All", field_validation="Strict"
        )
    except client.ApiException as error:
        # 422 Invalid (schema, CEL) or 400 BadRequest (strict decoding); nothing else.
        return error.status not in (400, 422), str(error.body)
    return True, ""


def _pydantic_accepts(manifest: dict[str, Any]) -> tuple[bool, str]:
    try:
        parse_manifest(manifest)
    except ManifestError as error:
        return False, str(error)
    return True, ""


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(patch=SPEC_PATCH)
def test_server_and_models_agree(server: tuple[Any, str], patch: dict[str, Any]) -> None:
    manifest = merge_patch(base_manifest(), {"spec": patch})
    manifest["spec"]["speculative"] = {
        k: v for k, v in patch["speculative"].items() if v is not None
    }
    by_server, server_says = _server_accepts(server, manifest)
    by_model, model_says = _pydantic_accepts(manifest)
    assert by_server == by_model, (
        f"server: {server_says or 'accepted'}\nmodel: {model_says or 'accepted'}"
    )
