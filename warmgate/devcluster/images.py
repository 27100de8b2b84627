"""Images without a Docker engine or a registry: buildah (vfs, chroot) from a local Debian base.

Four images, each an archive under ``.cache/devcluster/images`` named after a hash of its
inputs, so a warm run rebuilds only what changed. Each build is one step of ``steps.Steps``: a
line when it starts, one with its time, the tools' own output in ``.cache/logs/``:

- ``localhost/warmgate-pause``: the sandbox image, Kubernetes' own ``build/pause/linux/pause.c``
  of the pinned release, compiled static;
- ``localhost/warmgate-python-base``: ``mmdebstrap`` bookworm minbase with python3, passed to
  the repository's Dockerfile as ``PYTHON_IMAGE`` (real users keep the public default);
- ``localhost/warmgate``: the operator image, built from the repository's ``Dockerfile``;
- ``localhost/warmgate-standin-engine``: NOT vLLM. Its ``vllm`` entry point is the test double
  ``tests/doubles/standin_vllm.py`` and its ``habana_frameworks`` the test double
  ``tests/doubles/standin_hpu.py``, so the runner and the serving Pods run in real containers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from warmgate.devcluster.controlplane import K8S_VERSION, REPO_ROOT
from warmgate.devcluster.layout import CACHE
from warmgate.devcluster.steps import Step, StepFailed, Steps

IMAGES: Final = CACHE / "images"
BUILDAH_STORE: Final = CACHE / "buildah"
CA_BUNDLE: Final = "/etc/ssl/certs/ca-certificates.crt"
DEBIAN_MIRROR: Final = "http://deb.debian.org/debian"
BASE_PACKAGES: Final = "python3,python3-venv,python-is-python3,ca-certificates"
DOUBLES: Final = REPO_ROOT / "tests" / "doubles"
ENGINE_CONTAINERFILE: Final = """\
ARG BASE
FROM ${BASE}
LABEL org.opencontainers.image.title="warmgate-standin-engine" \\
      org.opencontainers.image.description="TEST DOUBLE, not vLLM: standin_vllm.py as vllm"
# The stand-in computes its bucket lists with warmgate.buckets, which needs pydantic 2.
RUN python3 -m venv --system-site-packages /opt/standin \\
 && PIP_NO_CACHE_DIR=1 /opt/standin/bin/pip install --quiet "pydantic>=2.7,<3"
ENV PATH=/opt/standin/bin:$PATH WARMGATE_STANDIN_ENGINE=1
COPY standin /opt/warmgate-standin
COPY habana_frameworks /usr/lib/python3/dist-packages/habana_frameworks
RUN chmod +x /opt/warmgate-standin/tests/doubles/standin_vllm.py \\
 && ln -s /opt/warmgate-standin/tests/doubles/standin_vllm.py /usr/local/bin/vllm
# A numeric non-root user, as Pod Security "restricted" wants of an image (issue 23 item 14).
USER 1000:1000
"""
Progress = Callable[[str], None]
BUILD_TOOLS: Final = ("buildah", "mmdebstrap", "gcc", "strip", "go")
Build = Callable[[str, Step], None]  # builds the image ``ref`` with the step's commands
Archive = Callable[[str, str, Step], None]  # commits ``ref`` into the archive destination
# What each build is and how long it usually takes (2 cores), for its step's first line.
HOW: Final = {
    "warmgate-python-base": ("mmdebstrap bookworm minbase + python3", "about 1 min"),
    "warmgate": (
        "buildah bud of the repository's Dockerfile",
        "pip installs the deps, about 1 min",
    ),
    "warmgate-standin-engine": ("the stand-in engine, a test double", "pip installs pydantic"),
    "warmgate-pause": ("Kubernetes' pause.c, gcc -static", "a few seconds"),
}


@dataclass(frozen=True)
class Image:
    """A built image: its reference and the archive holding it (a docker-archive, or for the
    real engine's image a gzip-compressed oci-archive)."""

    ref: str
    archive: Path


@dataclass(frozen=True)
class ImageSet:
    """The images the dev cluster runs."""

    pause: Image
    operator: Image
    engine: Image

    def all(self) -> tuple[Image, ...]:
        return (self.pause, self.operator, self.engine)


def _digest(files: Iterable[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    for path in sorted(files):
        h.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _package_files() -> list[Path]:
    """The warmgate package as the Dockerfile copies it: no caches, no dev cluster harness
    (.dockerignore leaves it out), so editing the harness rebuilds no image."""
    root = REPO_ROOT / "warmgate"
    return [
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".typed")
        and not {"__pycache__", "devcluster"} & set(p.parts)
    ]


def buildah(*args: str) -> list[str]:
    """A buildah command on the project's own vfs store under .cache."""
    store = ["--root", str(BUILDAH_STORE / "storage"), "--runroot", str(BUILDAH_STORE / "run")]
    return ["buildah", *store, "--storage-driver", "vfs", *args]


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({done.returncode}):\n{tail}")
    return done.stdout


class Builder:
    """Builds the image set into archives, reusing every archive whose inputs did not change."""

    def __init__(self, progress: Progress) -> None:
        self.steps = Steps(progress)
        IMAGES.mkdir(parents=True, exist_ok=True)

    def base(self) -> Image:
        """The local Debian base with python3 (kept in buildah's store: images build on it)."""
        return self._cached(
            "warmgate-python-base",
            _digest([], DEBIAN_MIRROR, BASE_PACKAGES),
            self._build_base,
            keep_in_store=True,
        )

    def ensure(self) -> ImageSet:
        """Build what is missing; return the set."""
        base = self.base()
        dockerfile = [REPO_ROOT / n for n in ("Dockerfile", "pyproject.toml", "README.md")]
        operator = self._cached(
            "warmgate",
            _digest([*dockerfile, *_package_files()], base.ref),
            lambda ref, step: self._build_operator(ref, base.ref, step),
        )
        doubles = [DOUBLES / "standin_vllm.py", DOUBLES / "standin_hpu.py"]
        engine = self._cached(
            "warmgate-standin-engine",
            _digest([*doubles, *_package_files()], base.ref, ENGINE_CONTAINERFILE),
            lambda ref, step: self._build_engine(ref, base.ref, step),
        )
        pause = self._cached("warmgate-pause", _digest([], K8S_VERSION), self._build_pause)
        return ImageSet(pause=pause, operator=operator, engine=engine)

    def _cached(self, name: str, digest: str, build: Build, keep_in_store: bool = False) -> Image:
        ref = f"localhost/{name}:{digest}"
        archive = IMAGES / f"{name}-{digest}.tar"
        in_store = (
            subprocess.run(
                buildah("inspect", "--type", "image", ref), capture_output=True, check=False
            ).returncode
            == 0
        )
        if archive.is_file():
            if keep_in_store and not in_store:  # the store was wiped: load, do not rebuild
                _run(buildah("pull", "--quiet", f"docker-archive:{archive}"))
            return Image(ref, archive)
        how, about = HOW[name] if not in_store else ("archived from buildah's store", "")
        with self.steps.step(f"image-{name}", f"image {ref}, {how}", about) as step:
            if not in_store:
                build(ref, step)
            tmp = archive.with_suffix(".partial")
            tmp.unlink(missing_ok=True)
            step.run(buildah("push", "--quiet", ref, f"docker-archive:{tmp}:{ref}"))
            tmp.rename(archive)
        _drop_older(name, archive)
        if not keep_in_store:  # vfs keeps a full copy per layer: free it once archived
            subprocess.run(buildah("rmi", "--force", ref), capture_output=True, check=False)
        return Image(ref, archive)

    def archived(self, name: str, digest: str, build: Archive, how: tuple[str, str]) -> Image:
        """Like ``_cached``, for an image committed straight into its archive: ``build(ref,
        destination, step)`` gets the `oci-archive:` destination. It never enters buildah's
        store, where a commit and a push would write a multi-GB image twice more. OCI, not
        docker-archive, because a docker-archive always holds its layers uncompressed: the
        archive and containerd's copy of the layers would be the image's full size twice."""
        ref = f"localhost/{name}:{digest}"
        archive = IMAGES / f"{name}-{digest}.tar"
        if archive.is_file():
            return Image(ref, archive)
        with self.steps.step(f"image-{name}", f"image {ref}, {how[0]}", how[1]) as step:
            tmp = archive.with_suffix(".partial")
            tmp.unlink(missing_ok=True)
            build(ref, f"oci-archive:{tmp}:{ref}", step)
            tmp.rename(archive)
        _drop_older(name, archive)
        return Image(ref, archive)

    def _commit_rootfs(
        self, ref: str, add: list[tuple[str, str]], config: list[str], step: Step
    ) -> None:
        ctr = step.run(buildah("from", "scratch")).strip()
        try:
            for src, dest in add:
                step.run(buildah("add", ctr, src, dest))
            step.run(buildah("config", *config, ctr))
            step.run(buildah("commit", "--quiet", ctr, ref))
        finally:
            subprocess.run(buildah("rm", ctr), capture_output=True, check=False)

    def _build_base(self, ref: str, step: Step) -> None:
        with tempfile.TemporaryDirectory(prefix="warmgate-base-") as tmp:
            tar = Path(tmp) / "base.tar"
            step.run(
                [
                    "mmdebstrap",
                    "--variant=minbase",
                    f"--include={BASE_PACKAGES}",
                    "bookworm",
                    str(tar),
                    DEBIAN_MIRROR,
                ]
            )
            self._commit_rootfs(ref, [(str(tar), "/")], ["--cmd", '["python3"]'], step)

    def _bud(
        self, ref: str, containerfile: Path, context: Path, build_arg: str, step: Step
    ) -> None:
        """buildah bud with chroot isolation; pip inside reaches PyPI with the machine's CAs.
        Not --quiet: the steps' output is what the step's log is for."""
        flags = ["--isolation", "chroot", "--network", "host", "--pull=never"]
        flags += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro", "--layers=false"]
        args = [*flags, "--build-arg", build_arg, "-f", str(containerfile), "-t", ref]
        step.run(buildah("bud", *args, str(context)))

    def _build_operator(self, ref: str, base: str, step: Step) -> None:
        self._bud(ref, REPO_ROOT / "Dockerfile", REPO_ROOT, f"PYTHON_IMAGE={base}", step)

    def _build_engine(self, ref: str, base: str, step: Step) -> None:
        with tempfile.TemporaryDirectory(prefix="warmgate-engine-") as tmp:
            ctx = Path(tmp)
            skip = shutil.ignore_patterns("__pycache__", "devcluster")
            shutil.copytree(REPO_ROOT / "warmgate", ctx / "standin" / "warmgate", ignore=skip)
            (ctx / "standin" / "tests" / "doubles").mkdir(parents=True)
            shutil.copy2(DOUBLES / "standin_vllm.py", ctx / "standin" / "tests" / "doubles")
            hpu = ctx / "habana_frameworks" / "torch" / "hpu"
            hpu.mkdir(parents=True)
            (ctx / "habana_frameworks" / "__init__.py").write_text('"""TEST DOUBLE."""\n')
            (hpu.parent / "__init__.py").write_text('"""TEST DOUBLE."""\n__version__ = "standin"\n')
            shutil.copy2(DOUBLES / "standin_hpu.py", hpu / "__init__.py")
            (ctx / "Containerfile").write_text(ENGINE_CONTAINERFILE)
            self._bud(ref, ctx / "Containerfile", ctx, f"BASE={base}", step)

    def _build_pause(self, ref: str, step: Step) -> None:
        source = _pause_source()
        with tempfile.TemporaryDirectory(prefix="warmgate-pause-") as tmp:
            binary = Path(tmp) / "pause"
            step.run(
                [
                    "gcc",
                    "-Os",
                    "-static",
                    f"-DVERSION={K8S_VERSION}",
                    "-o",
                    str(binary),
                    str(source),
                ]
            )
            step.run(["strip", str(binary)])
            self._commit_rootfs(
                ref,
                [(str(binary), "/pause")],
                ["--entrypoint", '["/pause"]', "--user", "65535"],
                step,
            )


def _drop_older(name: str, archive: Path) -> None:
    """This image's older archives go once the new one is written; only its own (name, dash,
    16 hex digits): `warmgate-*.tar` also matches warmgate-python-base-*, warmgate-vllm-cpu-*,
    ..., and every operator rebuild deleted them (the 7 GB real-engine archive included)."""
    for old in IMAGES.glob(f"{name}-*.tar"):
        if old != archive and re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{16}}\.tar", old.name):
            old.unlink()


def _pause_source() -> Path:
    """build/pause/linux/pause.c of the pinned k8s.io/kubernetes module (Go module cache)."""
    out = _run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{K8S_VERSION}"],
        cwd=Path(tempfile.gettempdir()),
    )
    return Path(json.loads(out)["Dir"]) / "build" / "pause" / "linux" / "pause.c"


def import_into_containerd(ctr: list[str], images: Iterable[Image], progress: Progress) -> None:
    """`ctr -n k8s.io images import` each archive not imported yet (names carry the hash), then
    remove the older builds of that image from containerd's store, which is kept under .cache
    between runs (each real-engine build is about 8 GB there: the layers and their snapshot)."""
    present = set(_run([*ctr, "images", "list", "-q"]).split())
    for image in images:
        if image.ref in present:
            continue
        began = time.monotonic()
        # --base-name: an oci-archive names its image in an annotation that ctr reads only with
        # it (else "import-<date>@sha256:..."); a docker-archive's tags match it as they are.
        name = image.ref.rpartition(":")[0]
        _run([*ctr, "images", "import", "--base-name", name, str(image.archive)])
        progress(f"imported {image.ref} into containerd in {time.monotonic() - began:.0f} s")
        old = superseded(_run([*ctr, "images", "list"]), image.ref)
        if old:
            # --sync: the content and snapshots go now; a container still running an old
            # build keeps its snapshot until it is removed.
            _run([*ctr, "images", "rm", "--sync", *old])
            progress(f"removed {len(old)} reference(s) of older {name} builds from containerd")


def superseded(listing: str, current: str) -> list[str]:
    """The references in ``ctr images list`` (REF TYPE DIGEST ...) of older builds of
    ``current``'s image: its other tags, and the image-ID references (``sha256:...``) the
    kubelet's CRI added for them, matched by manifest digest. A digest that an image kept also
    carries is never dropped."""
    rows = [line.split() for line in listing.splitlines()[1:]]
    digest = {row[0]: row[2] for row in rows if len(row) >= 3}
    name = current.rpartition(":")[0]
    older = {ref for ref in digest if ref != current and ref.rpartition(":")[0] == name}
    kept = {d for ref, d in digest.items() if ref not in older and not ref.startswith("sha256:")}
    gone = {digest[ref] for ref in older} - kept
    ids = {ref for ref, d in digest.items() if ref.startswith("sha256:")}
    return sorted(ref for ref in older | ids if digest[ref] in gone)


def unavailable() -> str | None:
    """Why the images cannot be built here (None when they can)."""
    if os.geteuid() != 0:
        return "not root: buildah's chroot isolation needs root"
    missing = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
    return f"missing {', '.join(missing)} (make packages)" if missing else None


def main() -> int:
    """`make images`: build what is missing, each image one step; say why not where it cannot."""

    def say(message: str) -> None:
        print(f"dev cluster: {message}", flush=True)

    why = unavailable()
    if why is not None:
        say(f"no images built here: {why}")
        return 0
    try:
        Builder(say).ensure()
    except StepFailed:
        return 1  # the step printed the log's tail and its name
    return 0


if __name__ == "__main__":
    sys.exit(main())
