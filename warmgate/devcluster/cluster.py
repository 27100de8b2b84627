"""The local cluster: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet
and kube-proxy of the pinned release, one node with 8 stand-in Gaudi cards, all on this machine.

``DevCluster.start`` takes the machine lock, cleans what a killed run left, starts a reaper that
tears everything down if this process dies, then brings the components up in order. Every
daemon is a child with PR_SET_PDEATHSIG (``ControlPlane._spawn``); ``stop`` and the reaper run
the same teardown (``teardown.tear_down``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from warmgate.devcluster import configs, network, teardown
from warmgate.devcluster.controlplane import ControlPlane, _openssl
from warmgate.devcluster.images import ImageSet, import_into_containerd
from warmgate.devcluster.layout import (
    CGROUP_PARENT,
    GATEWAY,
    GAUDI_CARDS,
    KUBERNETES_SERVICE_IP,
    NODE_LABELS,
    NODE_NAME,
    POD_CIDR,
    SERVICE_CIDR,
    Paths,
)
from warmgate.devcluster.lock import MachineLock
from warmgate.devcluster.storage import STORAGE_CLASS_MANIFEST, LocalPathProvisioner

Progress = Callable[[str], None]
ETCD_DIR = Path("/dev/shm/warmgate-devcluster-etcd")
KUBERNETES_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc.cluster.local")


def say(message: str) -> None:
    """Default progress: one line on stderr."""
    print(f"dev cluster: {message}", file=sys.stderr, flush=True)


class NodeControlPlane(ControlPlane):
    """The envtest control plane, set up for a node: reachable from Pods on the bridge address,
    the `kubernetes` Service's endpoint kept by the apiserver, ServiceAccount tokens mounted."""

    def _extra_pki(self, pki: Path) -> None:
        # The apiserver's client certificate for the kubelet (logs, exec), in system:masters.
        (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _openssl(
            "req",
            *ec,
            "-keyout",
            "kubelet-client.key",
            "-out",
            "kubelet-client.csr",
            "-subj",
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
            cwd=pki,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            "kubelet-client.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "client.ext",
            "-out",
            "kubelet-client.crt",
            cwd=pki,
        )

    def _apiserver_args(self, etcd_url: str, port: int) -> list[str]:
        envtest_only = (
            "--endpoint-reconciler-type=",
            "--disable-admission-plugins=",
            "--service-cluster-ip-range=",
        )
        args = [
            a for a in super()._apiserver_args(etcd_url, port) if not a.startswith(envtest_only)
        ]
        pki = self.workdir / "pki"
        return [
            *args,
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Without it `kubectl logs` resolves the node name through the machine's resolver.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
        ]

    def spawn(self, name: str, args: list[str], executable: Path | None = None) -> None:
        """Start one more daemon that dies with this process and stops with the cluster."""
        self._spawn(name, args, executable)

    def exited(self) -> list[str]:
        """Command lines of the daemons that exited (empty while all run)."""
        return [str(p.args) for p in self._procs if p.poll() is not None]

    def stop_daemon(self, binary: str, timeout: float = 30.0) -> None:
        """Stop one daemon with SIGTERM, as a crash or an operator's stop would; it is no
        longer the cluster's (``exited`` does not list it). Its log is kept beside the next
        one's (``<binary>.<n>.log``)."""
        for proc in self._procs:
            args = proc.args if isinstance(proc.args, list) else [proc.args]
            if Path(str(args[0])).name == binary and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=timeout)
                self._procs.remove(proc)
                kept = 1
                while (self.workdir / f"{binary}.{kept}.log").exists():
                    kept += 1
                (self.workdir / f"{binary}.log").rename(self.workdir / f"{binary}.{kept}.log")
                return
        raise LookupError(f"no running {binary}")


class DevCluster:
    """One single-node cluster; use as a context manager or call start/stop."""

    def __init__(self, assets: Path, images: ImageSet, progress: Progress = say) -> None:
        self.assets, self.images, self.progress = assets, images, progress
        self.paths = Paths.default()
        self.cp: NodeControlPlane | None = None
        self.provisioner: LocalPathProvisioner | None = None
        self.startup_seconds = 0.0
        self._lock = MachineLock()
        self._reaper: subprocess.Popen[bytes] | None = None
        self._reaper_pipe: int | None = None

    @property
    def kubeconfig(self) -> Path:
        assert self.cp is not None, "the cluster is not started"
        return self.cp.kubeconfig

    @property
    def ctr(self) -> list[str]:
        return ["ctr", "--address", str(self.paths.containerd_socket), "--namespace", "k8s.io"]

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        assert self.cp is not None, "the cluster is not started"
        return self.cp.kubectl(*args, stdin=stdin, check=check)

    def start(self) -> DevCluster:
        began = time.monotonic()
        self._lock.acquire(self.progress)
        try:
            self._clean_leftovers()
            self._start_reaper()
            self._start_components()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.progress(
            f"ready in {self.startup_seconds:.0f} s (node {NODE_NAME}, {GAUDI_CARDS} "
            f"stand-in habana.ai/gaudi cards)"
        )
        return self

    def _clean_leftovers(self) -> None:
        found = teardown.leftovers(self.paths)
        if ETCD_DIR.exists() or found:
            self.progress(f"cleaning up after a killed run: {', '.join(found) or 'etcd data'}")
            teardown.tear_down(self.paths, lambda m: self.progress(f"  {m}"))
            teardown.remove_tree(ETCD_DIR)

    def _start_reaper(self) -> None:
        read, write = os.pipe()
        env = {**os.environ, "WARMGATE_DEVCLUSTER_ROOT": str(self.paths.root)}
        fds = (read,) if self._lock.fd is None else (read, self._lock.fd)
        cmd = [sys.executable, "-m", "warmgate.devcluster.reaper", str(read)]
        # Its own session: a Ctrl-C or a kill of the test's process group does not reach it.
        self._reaper = subprocess.Popen(
            cmd, pass_fds=fds, start_new_session=True, env=env, stdin=subprocess.DEVNULL
        )
        os.close(read)
        self._reaper_pipe = write

    def _start_components(self) -> None:
        self.paths.root.mkdir(parents=True)
        network.set_up(self.paths)
        _prepare_cgroups()
        step = time.monotonic()
        sans = (
            f"IP:{GATEWAY}",
            f"IP:{KUBERNETES_SERVICE_IP}",
            *(f"DNS:{n}" for n in KUBERNETES_NAMES),
        )
        self.cp = NodeControlPlane(
            self.assets,
            address=GATEWAY,
            extra_sans=sans,
            etcd_dir=ETCD_DIR,
            workdir=self.paths.root / "control-plane",
        )
        self.cp.workdir.mkdir(parents=True)
        self.cp.start()
        self.progress(
            f"etcd + kube-apiserver ready at {self.cp.server} ({time.monotonic() - step:.0f} s)"
        )
        configs.write_all(self.paths, self.cp.ca_file, self.cp.kubeconfig, self.images.pause.ref)
        self._start_controllers()
        self._start_containerd()
        self._start_kubelet()
        self._start_kube_proxy()
        self._start_storage()
        self._wait(
            "the default ServiceAccount",
            lambda: (
                self.kubectl(
                    "get", "serviceaccount", "default", "-n", "default", check=False
                ).returncode
                == 0
            ),
        )

    def _start_controllers(self) -> None:
        assert self.cp is not None
        pki, kc = self.cp.workdir / "pki", self.cp.kubeconfig
        self.cp.spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--cluster-cidr={POD_CIDR}",
                "--allocate-node-cidrs=false",
                "--v=1",
            ],
        )
        self.cp.spawn("kube-scheduler", [f"--kubeconfig={kc}", "--leader-elect=false", "--v=1"])

    def _start_containerd(self) -> None:
        assert self.cp is not None
        config = self.paths.config / "containerd.toml"
        self.cp.spawn("containerd", ["--config", str(config)], Path("/usr/bin/containerd"))
        self._wait(
            "containerd",
            lambda: (
                subprocess.run([*self.ctr, "version"], capture_output=True, check=False).returncode
                == 0
            ),
        )
        teardown.purge_containerd(self.ctr)
        import_into_containerd(self.ctr, self.images.all(), self.progress)

    def stop_kubelet(self) -> None:
        """Stop the node's kubelet, as a kubelet that crashed or was stopped: the Pods' containers
        keep running under containerd, but nothing reports them, and the node controller marks
        the node NotReady once its lease is older than the grace period (50 s)."""
        assert self.cp is not None, "the cluster is not started"
        self.cp.stop_daemon("kubelet")
        self.progress("stopped the kubelet")

    def start_kubelet(self) -> None:
        """Start the kubelet again (after ``stop_kubelet``); returns once the node is Ready."""
        self._start_kubelet()

    def _start_kubelet(self) -> None:
        assert self.cp is not None
        labels = ",".join(f"{k}={v}" for k, v in NODE_LABELS.items())
        self.cp.spawn(
            "kubelet",
            [
                f"--config={self.paths.config / 'kubelet.yaml'}",
                f"--kubeconfig={self.cp.kubeconfig}",
                f"--root-dir={self.paths.kubelet_root}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={GATEWAY}",
                f"--node-labels={labels}",
                "--v=1",
            ],
        )
        self._wait(
            "the node to register",
            lambda: self.kubectl("get", "node", NODE_NAME, check=False).returncode == 0,
        )
        # The documented way to advertise an extended resource: a node status capacity patch.
        patch = [
            {"op": "add", "path": "/status/capacity/habana.ai~1gaudi", "value": str(GAUDI_CARDS)}
        ]
        self.kubectl(
            "patch",
            "node",
            NODE_NAME,
            "--subresource=status",
            "--type=json",
            "-p",
            json.dumps(patch),
        )
        self._wait("the node to be Ready with habana.ai/gaudi allocatable", self._node_ready)

    def _node_ready(self) -> bool:
        got = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if got.returncode != 0:
            return False
        status = json.loads(got.stdout).get("status", {})
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        )
        return ready and status.get("allocatable", {}).get("habana.ai/gaudi") == str(GAUDI_CARDS)

    def _start_kube_proxy(self) -> None:
        assert self.cp is not None
        self.cp.spawn("kube-proxy", [f"--config={self.paths.config / 'kube-proxy.yaml'}"])
        self._wait(
            "kube-proxy's nft rules for the kubernetes Service",
            lambda: (
                KUBERNETES_SERVICE_IP
                in subprocess.run(
                    ["nft", "list", "table", "ip", "kube-proxy"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
            ),
        )

    def _start_storage(self) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(STORAGE_CLASS_MANIFEST))
        assert self.cp is not None
        self.provisioner = LocalPathProvisioner(self.cp.api_client(), self.paths.volumes).start()

    def _wait(self, what: str, done: Callable[[], bool], timeout: float = 120.0) -> None:
        began = time.monotonic()
        while not done():
            dead = self.cp.exited() if self.cp else []
            if dead:
                raise RuntimeError(
                    f"{', '.join(dead)} exited while waiting for {what}; logs in "
                    f"{self.cp.workdir if self.cp else self.paths.root}"
                )
            if time.monotonic() - began > timeout:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)
        self.progress(f"{what}: ok ({time.monotonic() - began:.0f} s)")

    def stop(self) -> None:
        """Stop everything and leave the machine clean; release the lock."""
        if self.provisioner is not None:
            self.provisioner.stop()
        if self.cp is not None and self.paths.containerd_socket.exists():
            teardown.purge_containerd(self.ctr)  # while containerd runs: shims exit cleanly
        if self.cp is not None:
            self.cp._terminate()
        try:
            teardown.tear_down(self.paths, lambda m: None)
            teardown.remove_tree(ETCD_DIR)
        finally:
            self._stop_reaper()
            self._lock.release()
        self.progress("stopped; the machine is clean")

    def _stop_reaper(self) -> None:
        if self._reaper_pipe is not None:
            os.write(self._reaper_pipe, b"done")
            os.close(self._reaper_pipe)
            self._reaper_pipe = None
        if self._reaper is not None:
            self._reaper.wait(timeout=30)
            self._reaper = None

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The CPU weight of the node's Pods, all together, in busy nice-0 host threads per core. The
# kubelet's cgroupRoot is one entity beside every host thread: at the default weight (one
# thread's) all the node's Pods got about one thread's share whenever the host was busy, as
# under `make test`, where six pytest runs, their control planes and real engines share the
# cores with the node (there scenario l's first object was Ready after 404 s, and after 217 s
# with this weight; 125 s on a quiet machine). On a real node its Pods have the machine.
NODE_CPU_THREADS_PER_CORE: Final = 2
_V1_DEFAULT_SHARES, _V1_MAX_SHARES = 1024, 262144


def node_cpu_weight(cores: int) -> tuple[int, int]:
    """The cgroupRoot's ``cpu.shares`` (cgroup v1) and ``cpu.weight`` (v2: runc's and
    systemd's conversion of those shares)."""
    shares = min(_V1_DEFAULT_SHARES * NODE_CPU_THREADS_PER_CORE * cores, _V1_MAX_SHARES)
    return shares, 1 + ((shares - 2) * 9999) // (_V1_MAX_SHARES - 2)


def _prepare_cgroups() -> None:
    """The kubelet's cgroupRoot must exist in every hierarchy; cpuset needs its cpus and mems;
    the node's Pods weigh ``node_cpu_weight`` against the host's threads."""
    shares, weight = node_cpu_weight(os.cpu_count() or 1)
    for hierarchy in sorted(teardown.CGROUP_FS.iterdir()):
        if not (hierarchy / "cgroup.procs").exists():
            continue
        folder = hierarchy / CGROUP_PARENT
        folder.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists():
                (folder / name).write_text((hierarchy / name).read_text())
        if (folder / "cpu.shares").exists():
            (folder / "cpu.shares").write_text(str(shares))
        if (folder / "cpu.weight").exists():
            (folder / "cpu.weight").write_text(str(weight))
