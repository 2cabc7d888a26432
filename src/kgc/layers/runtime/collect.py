"""containerd + Kata evidence: the host query and the pure parser (tomllib).

Sources, best first: ``containerd config dump`` (the effective, merged config with every
default spelled out), then the config file plus its ``imports``. Keys that containerd
ignores (``enable_nri`` under the CRI plugin) never appear in a dump, so they are looked
for in the files. Everything here is pure: the snapshot in, a frozen evidence object out.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import posixpath

from kgc.core.hostfs import CommandResult, HostQuery, HostSnapshot, require_snapshot
from kgc.core.profile import Profile, RuntimeProfile
from kgc.evidence.containerd import (
    DEFAULT_NRI_SOCKET,
    KATA_SHIM,
    ConfigFile,
    ContainerdVersion,
    ContainerdWarning,
    PluginStatus,
    RuntimeEvidence,
    containerd_warnings,
    parse_toml,
    parse_version,
    redact_containerd_config,
    strip_log_lines,
)
from kgc.evidence.containerd_load import parse_plugins

# containerd's own API socket: present while the daemon runs
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"

# The containerd version a tree (or node) has installed, from its package database: dpkg's
# status file (the containerd stanzas only) and, where rpm is installed, the rpm database.
PACKAGE_CMD = (
    'f="$R/var/lib/dpkg/status"; if [ -r "$f" ]; then awk \'BEGIN { RS = ""; FS = "\\n" } '
    '{ p = ""; v = ""; st = ""; for (i = 1; i <= NF; i++) { '
    'if ($i ~ /^Package: /) p = substr($i, 10); else if ($i ~ /^Version: /) v = substr($i, 10); '
    'else if ($i ~ /^Status: /) st = substr($i, 9) } '
    'if (p ~ /^containerd(\\.io)?$/) printf "dpkg|%s|%s|%s\\n", p, v, st }\' "$f"; fi; '
    "if command -v rpm >/dev/null 2>&1 && "
    '{ [ -d "$R/var/lib/rpm" ] || [ -d "$R/usr/lib/sysimage/rpm" ]; }; then '
    "rpm --root \"${R:-/}\" -q --qf 'rpm|%{NAME}|%{VERSION}-%{RELEASE}|installed\\n' "
    "containerd containerd.io 2>/dev/null | grep '^rpm|'; fi; true"
)

_KATA_DIRS = (
    "/etc/kata-containers/*.toml",
    "/etc/kata-containers/config.d/*.toml",
    "/opt/kata/share/defaults/kata-containers/*.toml",
    "/opt/kata/share/defaults/kata-containers/config.d/*.toml",
    "/opt/kata/share/defaults/kata-containers/runtimes/*/*.toml",
    "/opt/kata/share/defaults/kata-containers/runtimes/*/config.d/*.toml",
    "/usr/share/defaults/kata-containers/*.toml",
    "/usr/share/defaults/kata-containers/config.d/*.toml",
)


def _no_root(cmd: str) -> str:
    """A command that only makes sense on the live root (an offline tree has no binaries)."""
    return f'if [ -n "$R" ]; then echo KGC-OFFLINE-TREE; exit 3; fi; {cmd}'


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _grpc_address(cfg: str) -> str:
    """Shell: containerd's API socket as the config's ``[grpc] address`` names it (else the
    default), for ``ctr``."""
    return (
        "A=$(awk '/^[[:space:]]*\\[/ { g = ($0 ~ /^[[:space:]]*\\[grpc\\][[:space:]]*"
        "(#.*)?$/) } g && /^[[:space:]]*address[[:space:]]*=/ { sub(/^[^=]*=[[:space:]]*\"/, "
        "\"\"); sub(/\".*$/, \"\"); print; exit }' " + _sh_quote(cfg) + " 2>/dev/null); "
        f'A="${{A:-{CONTAINERD_SOCKET}}}"'
    )


def _ctr(binq: str) -> str:
    """Shell: the ``ctr`` next to the containerd binary, else the one on PATH."""
    return (f"C={binq}; case \"$C\" in */*) C=\"${{C%/*}}/ctr\" ;; *) C=ctr ;; esac; "
            '[ -x "$C" ] || C=ctr')


# containerd's own log of the current boot: its warnings and errors (plugin init failures)
JOURNAL_CMD = (
    "command -v journalctl >/dev/null 2>&1 || { echo 'journalctl not found'; exit 127; }; "
    "journalctl -u containerd -b -o cat --no-pager 2>&1 | "
    "grep -E 'level=(warning|error|fatal)|starting containerd|^-- No entries' | tail -n 300"
)


def query_for(rp: RuntimeProfile) -> HostQuery:
    """Everything the runtime layer reads for a given profile (one batched script)."""
    cfg = rp.containerd_config
    cfg_dir = posixpath.dirname(cfg) or "/"
    binq = _sh_quote(rp.containerd_bin)
    shim_dirs = " ".join(_sh_quote(d) for d in rp.shim_dirs)
    return HostQuery(
        files=(
            cfg,
            f"{cfg_dir}/*.toml",
            f"{cfg_dir}/conf.d/*.toml",
            f"{cfg_dir}/config.d/*.toml",
            *_KATA_DIRS,
            *rp.kata_config_paths,
        ),
        links=tuple(f"{d}/{KATA_SHIM}" for d in rp.shim_dirs),
        stats=(
            rp.nri_socket,
            DEFAULT_NRI_SOCKET,
            "/run/nri/nri.sock",
            CONTAINERD_SOCKET,
            *(f"{d}/{KATA_SHIM}" for d in rp.shim_dirs),
        ),
        commands=(
            ("containerd_version", _no_root(f"{binq} --version")),
            ("containerd_package", PACKAGE_CMD),
            ("containerd_config_dump", _no_root(f"{binq} --config {_sh_quote(cfg)} config dump")),
            ("containerd_plugins", _no_root(
                f'{_grpc_address(cfg)}; {_ctr(binq)}; "$C" --address "$A" --timeout 10s '
                "plugins ls -d 2>&1")),
            ("containerd_journal", _no_root(JOURNAL_CMD)),
            (
                "kata_shim_path",
                _no_root(f"PATH=\"$PATH:$(printf '%s:' {shim_dirs})\"; command -v {KATA_SHIM}"),
            ),
        ),
    )


QUERY = query_for(RuntimeProfile())


def _imports(snap: HostSnapshot, main: ConfigFile) -> tuple[list[ConfigFile], list[str]]:
    pats = main.data.get("imports") if main.data else None
    if not isinstance(pats, list):
        return [], []
    files: list[ConfigFile] = []
    missing: list[str] = []
    base = posixpath.dirname(main.path)
    for pat in pats:
        if not isinstance(pat, str):
            continue
        full = pat if pat.startswith("/") else posixpath.join(base, pat)
        hits = [p for p in snap.file_paths() if fnmatch.fnmatchcase(p, full) and p != main.path]
        if not hits:
            missing.append(full)
        for h in hits:
            files.append(parse_toml(h, snap.read(h)))
    return files, missing


def _kata_files(snap: HostSnapshot) -> dict[str, ConfigFile]:
    out: dict[str, ConfigFile] = {}
    for p in snap.file_paths():
        if "kata" in p and p.endswith(".toml"):
            out[p] = parse_toml(p, snap.read(p))
    return out


def package_version(snap: HostSnapshot) -> tuple[ContainerdVersion | None, str]:
    """The installed containerd package's version (dpkg or rpm database), if any."""
    res = snap.command("containerd_package")
    if res is None:
        return None, ""
    for line in res.output.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or parts[0] not in ("dpkg", "rpm"):
            continue
        kind, pkg, ver, status = parts
        if kind == "dpkg" and "installed" not in status.split()[-1:]:
            continue  # removed, config-files only, half-installed...
        v = parse_version(ver.split(":", 1)[-1])
        if v.known:
            db = "dpkg status" if kind == "dpkg" else "rpm database"
            return v, f"{db}: package {pkg} {ver}"
    return None, ""


def redact_snapshot(snap: HostSnapshot, rp: RuntimeProfile | None = None) -> HostSnapshot:
    """The snapshot with registry credentials removed from every containerd config it holds
    (the profile's config file, the *.toml files next to it and in conf.d/config.d, and the
    ``containerd config dump`` output). Use it before a snapshot is written to a bundle."""
    rp = rp or RuntimeProfile()
    cfg_dir = posixpath.dirname(rp.containerd_config) or "/"
    pats = (rp.containerd_config, f"{cfg_dir}/*.toml", f"{cfg_dir}/conf.d/*.toml",
            f"{cfg_dir}/config.d/*.toml", "/etc/containerd/*.toml", "/etc/containerd/*/*.toml")
    files = {p: (redact_containerd_config(t) if any(fnmatch.fnmatchcase(p, x) for x in pats)
                 else t) for p, t in snap.files.items()}
    cmds = dict(snap.commands)
    d = cmds.get("containerd_config_dump")
    if d is not None:
        cmds["containerd_config_dump"] = CommandResult(d.rc, redact_containerd_config(d.output))
    return dataclasses.replace(snap, files=files, commands=cmds)


def _toml(path: str, text: str | None) -> ConfigFile:
    return parse_toml(path, None if text is None else redact_containerd_config(text))


def _imports_redacted(snap: HostSnapshot, main: ConfigFile) -> tuple[list[ConfigFile], list[str]]:
    files, missing = _imports(snap, main)
    return [_toml(f.path, snap.read(f.path)) for f in files], missing


def parse(snap: HostSnapshot, profile: Profile | None = None) -> RuntimeEvidence:
    snap = require_snapshot(snap, "runtime")
    rp = profile.runtime if profile is not None else RuntimeProfile()
    main = _toml(rp.containerd_config, snap.read(rp.containerd_config))
    imports, missing = _imports_redacted(snap, main)

    dump: ConfigFile | None = None
    dump_error = ""
    offline = False
    warnings: list = []
    d = snap.command("containerd_config_dump")
    if d is None:
        dump_error = "containerd config dump was not run"
    elif "KGC-OFFLINE-TREE" in d.output:
        offline = True
        dump_error = "offline tree: no containerd binary to ask"
    else:
        warnings = containerd_warnings(d.output)
        if d.rc != 0:
            dump_error = (
                f"`{rp.containerd_bin} config dump` failed (exit {d.rc}): "
                f"{redact_containerd_config(d.output).strip()[:300]}"
            )
        else:
            dump = _toml("containerd config dump", strip_log_lines(d.output))

    v = snap.command("containerd_version")
    version = ContainerdVersion("")
    version_error = ""
    if v is None:
        version_error = "containerd --version was not run"
    elif "KGC-OFFLINE-TREE" in v.output:
        offline = True
        version_error = "offline tree: no containerd binary to ask"
    elif v.rc != 0:
        version_error = (
            f"`{rp.containerd_bin} --version` failed (exit {v.rc}): {v.output.strip()[:200]}"
        )
    else:
        version = parse_version(v.output)
        if not version.known:
            version_error = f"unrecognised version output: {v.output.strip()[:200]!r}"

    declared, declared_source = package_version(snap)
    if declared is None and rp.containerd_version:
        declared = parse_version(rp.containerd_version + (".0" if rp.containerd_version.count(
            ".") == 1 else ""))
        declared_source = f"profile runtime.containerd_version: {rp.containerd_version}"

    shim_found: list[str] = []
    s = snap.command("kata_shim_path")
    if s is not None and s.rc == 0 and s.output.strip().startswith("/"):
        shim_found.append(s.output.strip().splitlines()[0])
    for dirp in rp.shim_dirs:
        p = f"{dirp}/{KATA_SHIM}"
        if p in snap.stats and p not in shim_found:
            shim_found.append(p)

    plugins, plugins_error = _plugins(snap)
    log, log_error = _journal(snap)
    return RuntimeEvidence(
        config_path=rp.containerd_config,
        main=main,
        imports=tuple(imports),
        missing_imports=tuple(missing),
        dump=dump,
        dump_error=dump_error,
        version=version,
        version_error=version_error,
        stats=dict(snap.stats),
        shim_found=tuple(shim_found),
        kata_files=_kata_files(snap),
        offline=offline,
        warnings=tuple(warnings),
        declared_version=declared,
        declared_source=declared_source,
        links={p: t for p, t in snap.links.items() if p.endswith("/" + KATA_SHIM)},
        plugins=plugins,
        plugins_error=plugins_error,
        log=tuple(log),
        log_error=log_error,
    )


def _plugins(snap: HostSnapshot) -> tuple[tuple[PluginStatus, ...] | None, str]:
    """containerd's plugin list (``ctr plugins ls -d``), or why it is not known."""
    res = snap.command("containerd_plugins")
    if res is None:
        return None, "`ctr plugins ls -d` was not run (evidence from an older kgc)"
    if "KGC-OFFLINE-TREE" in res.output:
        return None, "offline tree: no running containerd to ask"
    out = parse_plugins(res.output) if res.rc == 0 else None
    if out is None:
        return None, (f"`ctr plugins ls -d` failed (exit {res.rc}): "
                      f"{res.output.strip()[:300]}")
    return tuple(out), ""


def _journal(snap: HostSnapshot) -> tuple[list[ContainerdWarning], str]:
    """containerd's own warnings/errors of this boot (journal), or why they are not known."""
    res = snap.command("containerd_journal")
    if res is None:
        return [], "containerd's journal was not read (evidence from an older kgc)"
    if "KGC-OFFLINE-TREE" in res.output:
        return [], "offline tree: no journal of a running containerd"
    lines = containerd_warnings(res.output, also=("starting containerd",))
    if not lines and res.rc != 0:
        return [], f"containerd's journal could not be read (exit {res.rc}): " \
            f"{res.output.strip()[:200]}"
    return lines, ""
