"""A real local control plane (etcd + kube-apiserver on loopback) for tests and the demo.

This follows controller-runtime's envtest: the binaries come from a folder named by
``KUBEBUILDER_ASSETS`` (``kube-apiserver``, ``etcd``, ``kubectl``), or from the folder that
``hack/provision-envtest.sh`` fills under ``.cache/envtest/<version>/``. No kubelet, scheduler
or controller-manager runs: objects are stored and validated, nothing is scheduled.

The apiserver runs with RBAC authorization, a static admin token (group ``system:masters``)
and a service-account token issuer, so tests can also act as a ServiceAccount through the
TokenRequest API (``kubectl create token``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

K8S_VERSION = "v1.37.2"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ASSETS = REPO_ROOT / ".cache" / "envtest" / K8S_VERSION
PROVISION_SCRIPT = REPO_ROOT / "hack" / "provision-envtest.sh"
REQUIRED_BINARIES = ("kube-apiserver", "etcd", "kubectl")
ADMIN_USER = "warmgate-admin"


class AssetsUnavailableError(RuntimeError):
    """The control-plane binaries are missing and cannot be provisioned here."""


def find_assets(provision: bool = False) -> Path:
    """Return the asset folder, provisioning it when allowed and possible.

    Order: ``KUBEBUILDER_ASSETS``, then the repo cache, then ``hack/provision-envtest.sh``
    (only when ``provision`` is true and a Go toolchain exists).
    """
    env = os.environ.get("KUBEBUILDER_ASSETS")
    if env:
        return _checked(Path(env), "KUBEBUILDER_ASSETS")
    if all((DEFAULT_ASSETS / b).is_file() for b in REQUIRED_BINARIES):
        return DEFAULT_ASSETS
    if not provision:
        raise AssetsUnavailableError(
            f"no control-plane binaries: set KUBEBUILDER_ASSETS to a folder holding "
            f"{', '.join(REQUIRED_BINARIES)}, or run `make assets` ({PROVISION_SCRIPT})"
        )
    if shutil.which("go") is None or not PROVISION_SCRIPT.is_file():
        raise AssetsUnavailableError(
            "no KUBEBUILDER_ASSETS and no Go toolchain to build kube-apiserver; "
            "install Go or point KUBEBUILDER_ASSETS at envtest binaries"
        )
    subprocess.run(["bash", str(PROVISION_SCRIPT), "all"], check=True)
    return _checked(DEFAULT_ASSETS, str(PROVISION_SCRIPT))


def _checked(folder: Path, origin: str) -> Path:
    missing = [b for b in REQUIRED_BINARIES if not (folder / b).is_file()]
    if missing:
        raise AssetsUnavailableError(f"{origin}={folder} lacks {', '.join(missing)}")
    return folder


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _libc_prctl() -> Any:
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


# Resolved in the parent: between fork and exec the child makes one libc call and nothing else.
_PRCTL = _libc_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: SIGKILL the child when its parent dies, so no etcd outlives a killed test run."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_pki(pki: Path, extra_sans: tuple[str, ...] = ()) -> None:
    """Create a CA, an apiserver serving cert for 127.0.0.1/localhost and an SA signing key.

    ``extra_sans`` are more subjectAltName entries (``IP:...`` or ``DNS:...``), e.g. the
    address Pods reach the apiserver at. P-256 keys: generating three RSA-2048 keys took ~2 s
    of the start on a busy 2-core machine.
    """
    pki.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.crt",
             "-subj", "/CN=warmgate-local-ca", cwd=pki)  # fmt: skip
    sans = ",".join(("IP:127.0.0.1", "DNS:localhost", "DNS:kubernetes.default.svc", *extra_sans))
    (pki / "san.ext").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
    _openssl("req", *ec, "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=pki)  # fmt: skip
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "apiserver.crt",
             cwd=pki)  # fmt: skip
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


@dataclass
class ControlPlane:
    """etcd + kube-apiserver processes on loopback, with a kubeconfig for clients."""

    assets: Path
    # The apiserver listens (and is advertised) here; a node's Pods need a non-loopback one.
    address: str = "127.0.0.1"
    extra_sans: tuple[str, ...] = ()
    etcd_dir: Path | None = None  # default: a new folder on tmpfs (/dev/shm)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="warmgate-cp-")))
    token: str = field(default_factory=lambda: os.urandom(16).hex())
    server: str = ""
    startup_seconds: float = 0.0
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _extra_dirs: list[Path] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    def start(self, timeout: float = 60.0) -> ControlPlane:
        """Start etcd and the apiserver and wait until ``/readyz`` answers ok."""
        began = time.monotonic()
        _make_pki(self.workdir / "pki", self.extra_sans)
        self._extra_pki(self.workdir / "pki")
        (self.workdir / "tokens.csv").write_text(f'{self.token},{ADMIN_USER},1,"system:masters"\n')
        etcd_url = self._start_etcd()
        port = _free_port()
        self.server = f"https://{self.address}:{port}"
        self._spawn("kube-apiserver", self._apiserver_args(etcd_url, port))
        self._write_kubeconfig()
        try:
            self._wait_ready(began + timeout)
        except (RuntimeError, TimeoutError):
            self._terminate()  # keep workdir: the logs say why
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _extra_pki(self, pki: Path) -> None:
        """More certificates before the apiserver starts (none here; a node needs some)."""

    def _start_etcd(self) -> str:
        # etcd 3.4 has no --unsafe-no-fsync; tmpfs keeps its fsyncs cheap.
        shm = Path("/dev/shm")
        if self.etcd_dir is not None:
            self.etcd_dir.mkdir(parents=True)
        data = self.etcd_dir or Path(
            tempfile.mkdtemp(prefix="warmgate-etcd-", dir=shm if shm.is_dir() else None)
        )
        client, peer = f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--log-level=error",
            ],
        )
        self._extra_dirs.append(data)
        return client

    def _apiserver_args(self, etcd_url: str, port: int) -> list[str]:
        pki = self.workdir / "pki"
        return [
            f"--etcd-servers={etcd_url}",
            f"--secure-port={port}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            # Loopback is not a valid endpoint for the `kubernetes` Service; envtest does the same.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.workdir / 'certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # No controller-manager creates the `default` ServiceAccount of new namespaces.
            "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false",
            "--v=0",
        ]

    def _spawn(self, binary: str, args: list[str], executable: Path | None = None) -> None:
        """Start ``binary`` (from the assets, or ``executable``), logging to the workdir; it
        dies with this process (PR_SET_PDEATHSIG) and is terminated by ``stop``."""
        log = (self.workdir / f"{binary}.log").open("wb")
        self._logs.append(log)
        proc = subprocess.Popen(
            [str(executable or self.assets / binary), *args],
            stdout=log,
            stderr=log,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only the async-signal-safe prctl call
        )
        self._procs.append(proc)
        if len(self._procs) == 1:
            atexit.register(self._terminate)

    def process(self, binary: str) -> subprocess.Popen[bytes]:
        """The running process of ``binary`` (e.g. ``kube-apiserver``), for a test that stops
        and resumes it (SIGSTOP, SIGCONT)."""
        for proc in self._procs:
            args = proc.args if isinstance(proc.args, list) else [proc.args]
            if Path(str(args[0])).name == binary and proc.poll() is None:
                return proc
        raise LookupError(f"no running {binary}")

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: warmgate-local\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.ca_file}\n"
            f"users:\n- name: {ADMIN_USER}\n  user:\n    token: {self.token}\n"
            "contexts:\n- name: warmgate-local\n  context:\n    cluster: warmgate-local\n"
            f"    user: {ADMIN_USER}\n    namespace: default\n"
            "current-context: warmgate-local\n"
        )

    def _wait_ready(self, deadline: float) -> None:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"}
        )
        last = ""
        while time.monotonic() < deadline:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"control plane exited early:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise TimeoutError(f"apiserver not ready at {self.server}: {last}; logs in {self.workdir}")

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane and return the completed process."""
        cmd = [str(self.assets / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=check)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` bound to this control plane's kubeconfig."""
        from kubernetes import config  # noqa: PLC0415 - keeps this module importable without it

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    def _log_tail(self, lines: int = 5) -> str:
        tails = []
        for log in sorted(self.workdir.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log} ---\n" + "\n".join(text))
        return "\n".join(tails)

    def stop(self) -> None:
        """Stop the apiserver, then etcd, and remove their data."""
        self._terminate()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _terminate(self) -> None:
        for proc in reversed(self._procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        for folder in self._extra_dirs:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OperatorProcess:
    """`warmgate operator` as a child process, as the chart runs it.

    ``namespace`` None watches every namespace (`--all-namespaces`).
    """

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str | None,
        log: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.metrics_port, self.health_port = _free_port(), _free_port()
        scope = ["--namespace", namespace] if namespace else ["--all-namespaces"]
        cmd = [
            sys.executable, "-m", "warmgate", "operator", *scope,
            "--metrics-port", str(self.metrics_port),
            "--liveness", f"http://127.0.0.1:{self.health_port}/healthz",
        ]  # fmt: skip
        self.log = log
        self._out = log.open("wb")
        full_env = {**os.environ, **(env or {}), "KUBECONFIG": str(kubeconfig)}
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=self._out, stderr=subprocess.STDOUT)

    def get(self, path: str, port: int | None = None) -> str:
        """GET a path of the operator's metrics (default) or liveness port."""
        url = f"http://127.0.0.1:{port or self.metrics_port}{path}"
        with urllib.request.urlopen(url, timeout=2) as resp:
            return str(resp.read().decode())

    def wait_alive(self, timeout: float = 60.0) -> OperatorProcess:
        """Wait until kopf's liveness endpoint answers; fail with the log if the process died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the operator exited:\n{self.log.read_text()[-4000:]}")
            try:
                self.get("/healthz", self.health_port)
                return self
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"the operator did not become alive:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        """Terminate the operator (kopf stops its handlers gracefully on SIGTERM)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
