"""Targets: where evidence comes from.

- :class:`NodeTarget` — a live node reached through a testinfra transport (``local://``,
  ``ssh://``, ``paramiko://``, ``chroot://``, ``kubectl://``, ``docker://`` …), optionally
  reading files under an offline tree (``root``). ``chroot:///host?live=1&node=NAME`` is a
  *running* node's root mounted into a container (the in-cluster DaemonSet, :mod:`kgc.fleet`):
  its live /proc and /sys are under it, its own binaries run under chroot, verdicts name the
  node ``NAME``; without ``live=1`` a chroot is an offline tree (a mounted image).
- :class:`ClusterTarget` — a Kubernetes cluster: a kubeconfig and a context.
- a recorded bundle (:mod:`kgc.core.bundle`) stands in for either.

Everything a layer may ask about *where* it runs is decided here, once: the name used in
verdicts, test ids and the environment (:attr:`name`, never with credentials), whether
the target is this machine, whether it is a whole machine that may be rebooted, whether
its unix sockets are reachable from here, and — when it fails — what the user should do
about it (the remediation comes from the transport that failed).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import platform
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Literal

from kgc.core.hostfs import HostQuery, HostSnapshot, build_script, new_boundary, parse_output
from kgc.core.layer import Scope

HostKeys = Literal["strict", "accept-new"]

# transports that reach a whole machine (kernel, boot loader): the only ones a reboot
# test may use
WHOLE_MACHINE = ("local", "ssh", "safe-ssh", "paramiko")
SSH_KINDS = ("ssh", "safe-ssh", "paramiko")
CONTAINER_KINDS = ("docker", "podman", "lxc", "kubectl", "openshift")


class TargetError(Exception):
    """The target could not be reached or answered nothing usable. ``remediation`` says what
    to do about it, in terms of the transport that failed."""

    def __init__(self, message: str, remediation: str = "") -> None:
        super().__init__(message)
        self.remediation = remediation


class Unreachable(TargetError):
    """A valid target that did not answer (connection refused, DNS, timeout, TLS). Probed
    once: every later layer of the target gets this same error (one reason, not one per
    check), and the run goes on with the other targets (exit 1, not bad input)."""


class Refused(TargetError):
    """The target answered and refused the credentials (HTTP 401/403 on the first call):
    bad input like a bad kubeconfig (exit 2, one line, nothing written) — every check would
    only repeat the refusal."""


# testinfra's transports (testinfra.backend.BACKENDS, checked by tests/test_targets.py):
# a spec with another scheme is bad input, answered with this list
SCHEMES = ("local", "ssh", "safe-ssh", "paramiko", "chroot", "docker", "podman", "lxc",
           "kubectl", "openshift", "salt", "ansible", "winrm")


# -- names without secrets ---------------------------------------------------------------
def redact_url(spec: str) -> str:
    """``ssh://user:secret@host`` -> ``ssh://user:***@host``; other text unchanged."""
    if "://" not in spec:
        user, sep, rest = spec.rpartition("@")
        if sep and ":" in user:
            return f"{user.split(':', 1)[0]}:***@{rest}"
        return spec
    cred = _userinfo(spec)
    if cred is None or ":" not in cred[0]:
        return spec
    return _masked(spec, cred)


def _userinfo(spec: str) -> tuple[str, str] | None:
    """``(userinfo, rest)`` of ``SCHEME://userinfo@rest``, read from the raw text up to the
    last ``@`` before any query: wider than urllib's netloc, so a password holding ``/``
    (which urllib would take for a path) is still seen. None without userinfo."""
    scheme, sep, tail = spec.partition("://")
    if not sep:
        return None
    head = tail.split("?", 1)[0].split("#", 1)[0]
    userinfo, at, _ = head.rpartition("@")
    if not at or userinfo.startswith("/"):  # chroot:///mnt/a@b: a path, not a user
        return None
    return userinfo, tail[len(userinfo) + 1:]


def _masked(spec: str, cred: tuple[str, str]) -> str:
    user = urllib.parse.unquote(cred[0].split(":", 1)[0])
    return f"{spec.split('://', 1)[0]}://{user}:***@{cred[1]}"


def refuse_password(spec: str) -> None:
    """Refuse ``user:password@`` in a target spec (exit 2 where a target is bad input). kgc
    supports no password logins: the spec is on kgc's own command line, which every local
    user reads with ``ps``, and testinfra would hand an ssh:// password to ``sshpass -p`` on
    a second one. Keys and agents keep the secret off every command line."""
    if "://" not in spec:  # a bare host: testinfra's paramiko default
        spec = "paramiko://" + spec
    cred = _userinfo(spec)
    if cred is None or ":" not in cred[0]:
        return
    raise TargetError(
        f"target {_masked(spec, cred)} carries a password: refused, because a "
        "password in a target is on kgc's command line for every local user to read (ps, "
        "shell history) and ssh would get it through `sshpass -p` on another; drop it and log "
        "in with a key: --ssh-identity-file FILE, ssh-agent, or an IdentityFile in "
        "--ssh-config",
        "remove the password from the target; authenticate with --ssh-identity-file, "
        "ssh-agent or --ssh-config",
    )


@dataclass(frozen=True)
class Address:
    """A ``--hosts`` entry taken apart. ``raw`` may hold a password (a recorded name): never
    print it; a :class:`NodeTarget` refuses one (:func:`refuse_password`)."""

    raw: str
    kind: str
    host: str = ""
    port: str = ""
    user: str = ""
    path: str = ""
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Address:
        spec = spec.strip()
        if spec in ("", "local", "local://"):
            return cls(spec or "local://", "local")
        if "://" not in spec:  # testinfra's default transport for a bare host name
            spec = "paramiko://" + spec
        try:
            u = urllib.parse.urlsplit(spec)
            port = str(u.port or "")
        except ValueError as exc:
            raise TargetError(
                f"cannot parse target {redact_url(spec)!r}: {exc}",
                "Give targets as SCHEME://[user@]host[:port], e.g. ssh://root@gpu-a",
            ) from None
        kind = u.scheme.lower()
        params = tuple((k, v[0]) for k, v in urllib.parse.parse_qs(u.query).items())
        return cls(
            raw=spec,
            kind=kind,
            host=urllib.parse.unquote(u.hostname or ""),
            port=port,
            user=urllib.parse.unquote(u.username or ""),
            path=urllib.parse.unquote(u.path),
            params=params,
        )

    def param(self, key: str) -> str | None:
        return dict(self.params).get(key)

    @property
    def live_root(self) -> bool:
        """``chroot:///host?live=1``: a running node's root (its /proc, /sys mounted under it)."""
        return self.kind == "chroot" and self.param("live") in ("1", "true", "yes")

    @property
    def redacted(self) -> str:
        return redact_url(self.raw)

    @property
    def name(self) -> str:
        """One name per node: verdicts, test ids and the environment all use it."""
        if self.kind == "local":
            return platform.node() or "localhost"
        if self.kind in SSH_KINDS:
            host = f"[{self.host}]" if ":" in self.host else self.host
            return f"{host}:{self.port}" if self.port else host
        if self.kind == "chroot":
            return self.param("node") or f"chroot:{self.path or self.host}"
        if self.kind in ("kubectl", "openshift"):
            ns = self.param("namespace")
            return f"{ns}/{self.host}" if ns else self.host
        return f"{self.kind}:{self.host or self.path}"

    @property
    def loopback(self) -> bool:
        h = self.host.strip("[]").lower()
        if h in ("localhost", "localhost.localdomain", "ip6-localhost"):
            return True
        try:
            return ipaddress.ip_address(h).is_loopback
        except ValueError:
            return False


# -- remediation per transport -------------------------------------------------------------
def ssh_command(addr: Address, ssh_config: str | None = None,
                identity_file: str | None = None, command: str = "true") -> str:
    """The ``ssh`` command line that reaches ``addr`` as kgc does — one a user can paste
    (``ssh -p 1 root@127.0.0.1 true``; ``HOST:PORT`` is not ssh syntax)."""
    import shlex

    parts = ["ssh"]
    if ssh_config:
        parts += ["-F", ssh_config]
    if identity_file:
        parts += ["-i", identity_file]
    if addr.port:
        parts += ["-p", addr.port]
    parts.append(f"{addr.user}@{addr.host}" if addr.user else addr.host)
    parts.append(command)
    return " ".join(shlex.quote(p) for p in parts)


def _remedy(t: NodeTarget) -> str:
    addr, k = t.address, t.address.kind
    if k == "local":
        return ("Run kgc with permission to read /sys, /proc and /boot (root, or --sudo) and "
                "make sure `sh` and `awk` are on PATH.")
    if k in SSH_KINDS:
        keys = (
            "its host key must be known (ssh-keyscan -H HOST >> ~/.ssh/known_hosts after "
            "checking the fingerprint, or UserKnownHostsFile in --ssh-config); "
            if t.host_keys == "strict"
            else ""
        )
        cmd = ssh_command(addr, t.ssh_config, t.ssh_identity_file)
        return (f"Make {addr.name} reachable over SSH as {addr.user or 'the configured user'}: "
                f"`{cmd}` must work without a prompt ({keys}key in "
                "--ssh-identity-file or the agent), and the user must read /sys, /proc and /boot "
                "(root, or --sudo).")
    if k == "chroot":
        return "Run kgc as root (chroot needs it) with an existing, populated directory tree."
    if k in ("kubectl", "openshift"):
        return (f"Make `kubectl exec {addr.host}` work (pod running, kubeconfig/context, RBAC "
                "pods/exec) and mount the node's /sys, /proc, /boot and /etc read-only into it.")
    if k in ("docker", "podman", "lxc"):
        return f"Make `{k} exec {addr.host} sh` work (container running, permission to exec)."
    return f"Make the {k}:// transport work for {addr.name} (see testinfra's documentation)."


# -- live node ---------------------------------------------------------------------------------
@dataclass
class NodeTarget:
    """A live node behind a testinfra transport. ``root`` prefixes every path read (an
    offline tree such as a mounted node image, or a self-test's fake /sys)."""

    spec: str = "local://"
    root: str = ""
    sudo: bool = False
    ssh_config: str | None = None
    ssh_identity_file: str | None = None
    host_keys: HostKeys = "strict"
    timeout_s: int = 120
    # the bound on one collection on the node (the whole script), where the node has
    # `timeout` (coreutils, busybox): past it the collector is stopped and every layer that
    # needed it is an error naming the bound
    collect_timeout_s: int = 300
    round_trips: int = 0
    _host: Any = field(default=None, repr=False)

    scope = Scope.NODE
    origin = "live"

    def __post_init__(self) -> None:
        refuse_password(self.spec.strip())  # before parsing: its errors print the spec
        self.address = Address.parse(self.spec)
        a = self.address
        if a.kind not in SCHEMES:
            raise TargetError(
                f"target {a.redacted}: unknown scheme {a.kind + '://'!r}; valid schemes: "
                + ", ".join(k + "://" for k in SCHEMES),
                "give the target as SCHEME://[user@]host[:port] with one of those schemes, "
                "e.g. ssh://root@gpu-a",
            )

    def validate(self) -> NodeTarget:
        """What the entry points (the pytest plugin, ``kgc snapshot``) decide before any
        check runs, as bad input (exit 2, one line; the scheme is checked when the target is
        made): a ``chroot://`` or ``--root`` directory that does not exist. Reachability is
        not bad input: a valid spec is probed when first used (:class:`Unreachable`)."""
        a = self.address
        if a.kind == "chroot":
            path = a.path or a.host
            if not path or not os.path.isdir(path):
                raise TargetError(f"target {a.redacted}: no directory {path or '(none)'!r} "
                                  "to chroot into",
                                  "give the path of an existing root tree: chroot:///PATH")
        if self.root and not os.path.isdir(self.root):
            raise TargetError(f"--root {self.root}: no such directory",
                              "give the directory of an existing offline tree")
        return self

    @property
    def kind(self) -> str:
        return self.address.kind

    @property
    def name(self) -> str:
        n = self.address.name
        return f"{n}:{self.root}" if self.root else n

    @property
    def redacted(self) -> str:
        return self.address.redacted + (f" (root {self.root})" if self.root else "")

    @property
    def offline_tree(self) -> bool:
        """Files only: an image or a directory tree, no running kernel or services."""
        return bool(self.root) or (self.kind == "chroot" and not self.address.live_root)

    @property
    def is_this_machine(self) -> bool:
        return self.kind == "local" and not self.root

    @property
    def sockets_reachable(self) -> bool:
        """Can kgc open the node's unix sockets (NRI, CRI) directly from here?"""
        return self.is_this_machine

    @property
    def remediation(self) -> str:
        return _remedy(self)

    def reboot_refusal(self) -> str | None:
        """Why this target must not be rebooted (None: it may, given --allow-reboot)."""
        a = self.address
        if self.kind == "local":
            return ("refusing to reboot the machine that runs kgc (local:// target); run the "
                    "reboot test against a remote node: --hosts ssh://root@NODE --allow-reboot")
        if self.address.live_root and not self.root:
            return (f"refusing to reboot {self.name} from a pod: a pod shares the node with "
                    "others; reboot over SSH to the node itself")
        if self.root or self.kind == "chroot":
            return f"refusing to reboot {self.name}: an offline tree, not a running machine"
        if self.kind in CONTAINER_KINDS:
            return (f"refusing to reboot through {self.kind}://: a pod or container shares the "
                    "node with others; reboot over SSH to the node itself")
        if self.kind not in WHOLE_MACHINE:
            return f"refusing to reboot through {self.kind}://: not known to reach a whole machine"
        if a.loopback:
            return (f"refusing to reboot {self.name}: a loopback address is this machine or a "
                    "port forwarded to it; name the node (an ssh_config Host alias for a VM)")
        return None

    # -- I/O ---------------------------------------------------------------------------
    @property
    def host(self) -> Any:
        if self._host is None:
            self._host = _testinfra_host(self)
        return self._host

    def run(self, script: str, limit_s: int | None = None) -> tuple[int, str, str]:
        """One round trip: run a shell script on the node (stopped after ``limit_s`` seconds
        where the node has ``timeout``)."""
        self.round_trips += 1
        env_prefix = f"KGC_ROOT={_q(self.root)} " if self.root else ""
        cmd = f"{env_prefix}sh -c {_q(script)}"
        if limit_s is not None:
            cmd = f"{env_prefix}sh -c {_q(_BOUNDED)} {int(limit_s)} {_q(script)}"
        try:
            res = self.host.run(cmd)
        except Exception as exc:  # noqa: BLE001 - transport failures become TargetError
            raise Unreachable(
                f"{self.name}: could not run the collector over {self.kind}://: {_brief(exc)}",
                self.remediation,
            ) from exc
        return res.rc, res.stdout, res.stderr

    def collect(self, query: HostQuery) -> HostSnapshot:
        boundary = new_boundary()
        rc, out, err = self.run(build_script(query, boundary), self.collect_timeout_s)
        snap = parse_output(out, boundary)
        if not snap.complete:
            why = (f"stopped at its time bound of {self.collect_timeout_s} s" if rc in (124, 137)
                   else f"exit {rc}")
            raise TargetError(
                f"{self.name}: the collector did not finish ({why}); "
                f"stderr: {err.strip()[:500] or '(none)'}",
                self.remediation,
            )
        return snap


# `sh -c _BOUNDED LIMIT SCRIPT`: the script under `timeout` (SIGTERM at the bound) when the
# node has one, else as it is; one process more, whatever the number of devices
_BOUNDED = ('if command -v timeout >/dev/null 2>&1; then exec timeout "$0" sh -c "$1"; fi; '
            'exec sh -c "$1"')


def _testinfra_host(t: NodeTarget) -> Any:
    import testinfra

    kw: dict[str, Any] = {"sudo": t.sudo}
    if t.ssh_config:
        kw["ssh_config"] = t.ssh_config
    if t.ssh_identity_file:
        kw["ssh_identity_file"] = t.ssh_identity_file
    if t.kind in SSH_KINDS:
        kw["timeout"] = t.timeout_s
    if t.kind in ("ssh", "safe-ssh"):
        # command-line -o wins over any ssh_config: unknown host keys are refused unless the
        # user opted out loudly
        policy = "yes" if t.host_keys == "strict" else "accept-new"
        kw["ssh_extra_args"] = f"-o StrictHostKeyChecking={policy}"
    if t.kind == "paramiko":
        from testinfra.host import Host

        host_spec, extra = _parse_testinfra(t.address.raw)
        kw.update({k: v for k, v in extra.items() if k != "connection"})
        backend = _strict_paramiko()(host_spec, host_keys=t.host_keys, **kw)
        h = Host(backend)
        backend.set_host(h)
        return h
    if t.kind == "chroot":
        # testinfra's URL parser loses an absolute path (chroot:///mnt -> ''), and kgc's own
        # parameters (live, node) are not testinfra's: name the directory directly
        path = t.address.path or t.address.host
        return testinfra.get_host(path, connection="chroot", **kw)
    return testinfra.get_host(t.address.raw, **kw)


def _parse_testinfra(spec: str) -> tuple[str, dict[str, Any]]:
    from testinfra.backend import parse_hostspec

    return parse_hostspec(spec)


@functools.cache
def _strict_paramiko() -> type:
    """testinfra's paramiko backend with a host-key policy: unknown keys are refused
    (RejectPolicy) unless the user opted out; known_hosts from ~/.ssh and the ssh_config's
    UserKnownHostsFile are loaded. (testinfra's own backend warns and accepts any key.)"""
    import paramiko
    from testinfra.backend.paramiko import ParamikoBackend

    class StrictParamikoBackend(ParamikoBackend):  # type: ignore[misc]
        def __init__(self, hostspec: str, host_keys: HostKeys = "strict", **kw: Any) -> None:
            self._kgc_host_keys = host_keys
            super().__init__(hostspec, **kw)

        @functools.cached_property
        def client(self) -> paramiko.SSHClient:  # type: ignore[override]
            client = paramiko.SSHClient()
            client.load_system_host_keys()
            cfg: dict[str, Any] = {
                "hostname": self.host.name,
                "port": int(self.host.port) if self.host.port else 22,
                "username": self.host.user,
                "timeout": self.timeout,
                "password": self.host.password,
            }
            conf_path = self.ssh_config or os.path.expanduser("~/.ssh/config")
            if os.path.exists(conf_path):
                sc = paramiko.SSHConfig.from_path(conf_path)
                self._load_ssh_config(client, cfg, sc, os.path.dirname(conf_path))
                for kh in sc.lookup(self.host.name).get("userknownhostsfile", "").split():
                    kh = os.path.expanduser(kh)
                    if os.path.exists(kh):
                        client.load_host_keys(kh)
            # after the config: its StrictHostKeyChecking=no does not weaken the default
            client.set_missing_host_key_policy(
                paramiko.RejectPolicy()
                if self._kgc_host_keys == "strict"
                else paramiko.AutoAddPolicy()
            )
            if self.ssh_identity_file:
                cfg["key_filename"] = self.ssh_identity_file
            client.connect(**cfg)
            return client

    return StrictParamikoBackend


def _brief(exc: Exception) -> str:
    """A transport error without the (long) collector script in it."""
    arg = exc.args[0] if exc.args else None
    rc = getattr(arg, "exit_status", None) if arg is not None else None
    if rc is not None:
        err = getattr(arg, "stderr", "") or ""
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        return f"exit {rc}: {redact_url(err.strip()[-500:]) or '(no stderr)'}"
    text = redact_url(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= 600 else text[:300] + " … " + text[-300:]


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


# -- cluster -----------------------------------------------------------------------------
# kgc.kube is imported in the functions below, not at the top: it loads the Kubernetes
# client (about a second), which a node run, an offline evaluation and every pytest start
# (the plugin imports this module) do not need. kube never imports core, so no cycle.
@dataclass
class ClusterTarget:
    """A Kubernetes cluster: the kubeconfig and context the run uses, resolved as kubectl
    resolves them (:mod:`kgc.kube.config`: ``kubeconfig`` None means ``$KUBECONFIG``'s files
    merged, else ``~/.kube/config``). The kubeconfig's content (tokens, client keys) never
    leaves this object."""

    kubeconfig: str | None = None  # --kubeconfig as given
    context: str | None = None  # --context as given
    round_trips: int = 0
    # the probe's answer: None not probed yet, () answered, (error,) refused or unreachable
    _probed: tuple[TargetError, ...] | None = field(default=None, repr=False, compare=False)

    scope = Scope.CLUSTER
    origin = "live"

    @classmethod
    def for_run(cls, kubeconfig: str | None, context: str | None,
                validate: bool = True) -> ClusterTarget | None:
        """The run's cluster, or None when none is asked for (no --kubeconfig, $KUBECONFIG
        unset, no ~/.kube/config). With ``validate`` the kubeconfig and context are checked
        (:meth:`validate`: ``TargetError``, bad input, before any run)."""
        # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
        from kgc.kube import config

        if not config.configured(kubeconfig):
            return None
        t = cls(kubeconfig or None, context or None)
        return t.validate() if validate else t

    def validate(self) -> ClusterTarget:
        """Bad input, decided before any check runs (``TargetError``: exit 2, one line): a
        kubeconfig that does not exist, is not a kubeconfig, names no such context, or whose
        context's cluster and user entries the client cannot load. Never contacts the
        cluster (:meth:`probe` does)."""
        # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
        from kgc.kube import config, connect

        if config.explicit(self.kubeconfig) and not config.kubeconfig_files(self.kubeconfig):
            raise TargetError(f"--kubeconfig {self.kubeconfig}: no such file",
                              "pass the path of an existing kubeconfig")
        try:
            connect(self.kubeconfig, self.context).close()
        except config.KubeError as exc:
            what = f"--context {self.context}: " if isinstance(exc, config.UnknownContext) \
                and self.context else ""
            raise TargetError(f"{what}{exc}", exc.remediation) from None
        return self

    def probe(self) -> None:
        """Ask the API server for its version, once (the answer is kept): raises
        :class:`Refused` when it refuses the credentials (401/403) and :class:`Unreachable`
        when it does not answer — every cluster check then shares that one error."""
        if self._probed is None:
            # startup: kgc.kube loads the Kubernetes client (~1 s), for cluster work only
            from kgc.kube import config

            try:
                with self.connect() as k:
                    k.server_version()
                self._probed = ()
            except config.KubeRefused as exc:
                self._probed = (Refused(f"cluster {self.name}: {exc}", exc.remediation),)
            except config.KubeError as exc:
                self._probed = (Unreachable(f"cluster {self.name}: {exc}",
                                            exc.remediation or self.remediation),)
            except TargetError as exc:
                self._probed = (exc,)
            except Exception as exc:  # noqa: BLE001 - an answer that is not a version
                self._probed = (Unreachable(
                    f"cluster {self.name}: its API server answered /version with something "
                    f"that is not a Kubernetes version ({_brief(exc)[:300]})",
                    self.remediation),)
        if self._probed:
            raise self._probed[0]

    def probed(self, error: TargetError | None) -> None:
        """Take another process's probe answer (an xdist worker: the controller probed)."""
        self._probed = (error,) if error is not None else ()

    @functools.cached_property
    def _names(self) -> tuple[str, str, str]:
        """(source, context, cluster) as resolved, for naming only ('' where unresolvable)."""
        # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
        from kgc.kube import config

        try:
            r = config.resolve(self.kubeconfig, self.context)
        except config.KubeError:
            paths = config.kubeconfig_paths(self.kubeconfig)
            return os.pathsep.join(str(p) for p in paths), self.context or "", ""
        return r.source, r.context, r.cluster

    @property
    def name(self) -> str:
        _, ctx, cluster = self._names
        return cluster or ctx or "cluster"

    @property
    def redacted(self) -> str:
        source, ctx, _ = self._names
        return f"kubeconfig {source or '(none)'}" + (f" context {ctx}" if ctx else "")

    @property
    def remediation(self) -> str:
        return ("Point kgc at the cluster: --kubeconfig FILE [--context NAME] (or $KUBECONFIG), "
                "with credentials bound to the certification role (deploy/rbac/"
                "kgc-certify.yaml), and check `kubectl --kubeconfig FILE get nodes` works.")

    def connect(self) -> Any:
        """A :class:`kgc.kube.Kube` client (imported only when a cluster layer runs)."""
        # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
        from kgc.kube import connect

        try:
            return connect(self.kubeconfig, self.context)
        except Exception as exc:  # noqa: BLE001 - reported with the transport's remedy
            raise TargetError(f"cluster {self.name}: {_brief(exc)}",
                              getattr(exc, "remediation", "") or self.remediation) from exc
