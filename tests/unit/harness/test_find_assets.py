"""The harness finds control-plane binaries the envtest way, or says exactly what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from warmgate.devcluster import controlplane
from warmgate.devcluster.controlplane import AssetsUnavailableError, find_assets


def make_assets(folder: Path, names: tuple[str, ...]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
    return folder


def test_kubebuilder_assets_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assets = make_assets(tmp_path / "assets", ("kube-apiserver", "etcd", "kubectl"))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert find_assets() == assets


def test_incomplete_kubebuilder_assets_names_the_missing_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(make_assets(tmp_path / "a", ("etcd",))))
    with pytest.raises(AssetsUnavailableError, match="lacks kube-apiserver, kubectl"):
        find_assets()


def test_without_assets_or_go_the_error_says_how_to_provide_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setattr(controlplane, "DEFAULT_ASSETS", tmp_path / "none")
    monkeypatch.setenv("PATH", str(tmp_path))  # no `go` here
    with pytest.raises(AssetsUnavailableError, match="no Go toolchain"):
        find_assets(provision=True)
    with pytest.raises(AssetsUnavailableError, match="set KUBEBUILDER_ASSETS"):
        find_assets(provision=False)
