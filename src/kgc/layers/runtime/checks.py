"""Layer ``runtime``: containerd's NRI truth, the Kata handler, and Kata's VFIO config.

Every evaluator is pure: :class:`RuntimeEvidence` + :class:`Profile` in, an Outcome out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.model import Outcome, Registry, Severity, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.containerd import (
    DEFAULT_NRI_SOCKET,
    KATA_RUNTIME_TYPE,
    KATA_SHIM,
    NRI_PLUGIN,
    NRI_SECTION,
    VFIO_PORTS,
    RuntimeEvidence,
    handler_snippet,
    hypervisors,
    ignored_keys,
    kata_config,
    nri_enable_snippet,
    nri_state,
    place_handler,
    sizing_evidence,
)
from kgc.evidence.containerd_load import (
    CriLoad,
    Edit,
    cri_state,
    nri_edits,
    render_edits,
)
from kgc.layers.runtime.collect import CONTAINERD_SOCKET

CHECKS = Registry()


@CHECKS.check(
    "runtime.containerd-version",
    title="containerd is 1.7 or newer (NRI plugin socket protocol)",
    remediation="Install containerd >= 1.7 (2.x recommended: NRI is on by default there).",
    severity=Severity.CRITICAL,
)
def containerd_version(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    v, source = ev.known_version()
    evidence: dict[str, Any] = {"version_source": source or None, "version_output": ev.version.raw}
    if not v.known:
        if ev.offline:
            return skipped(
                "offline tree: no containerd binary to ask for its version, no containerd "
                "package in its dpkg/rpm database and no runtime.containerd_version in the "
                "profile",
                config_version=ev.config_version,
            )
        return failed(
            f"cannot tell the containerd version: {ev.version_error}",
            f"Make `{profile.runtime.containerd_bin} --version` work on the node (containerd on "
            "PATH, or set runtime.containerd_bin in the profile).",
            **evidence,
        )
    where = "" if source == "containerd --version" else f" (from {source}"
    if where:
        where += "; offline tree)" if ev.offline else ")"
    if not v.at_least(1, 7):
        return failed(
            f"containerd {v}{where} has only NRI v0.1 (enabled by /etc/nri/conf.json, no plugin "
            "socket); NRI device plugins need containerd >= 1.7",
            version=str(v),
            **evidence,
        )
    return passed(f"containerd {v}{where}", version=str(v), **evidence)


@CHECKS.check(
    "runtime.config",
    title="containerd config is readable, valid TOML, and of a version this containerd reads",
    remediation="Fix the containerd config file (`containerd config default` prints a valid one).",
    severity=Severity.CRITICAL,
)
def config(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    evidence: dict[str, Any] = {
        "config_path": ev.config_path,
        "imports": [f.path for f in ev.imports],
        "effective_source": ev.effective_source,
        "config_version": ev.config_version,
    }
    for f in (ev.main, *ev.imports):
        if f.error:
            return failed(f.error, f"Fix the TOML syntax in {f.path}.", **evidence)
    if ev.main.text is None and ev.dump is None:
        return failed(
            f"{ev.config_path} does not exist and no effective config could be read "
            f"({ev.dump_error})",
            f"Create {ev.config_path} (`containerd config default > {ev.config_path}`) or set "
            "runtime.containerd_config in the profile to the file the node uses.",
            **evidence,
        )
    if ev.dump is not None and ev.dump.error:
        return failed(f"`containerd config dump` output is not TOML: {ev.dump.error}", **evidence)
    v, _src = ev.known_version()
    if v.known and v.major is not None and v.major < 2 and ev.config_version >= 3:
        return failed(
            f"{ev.config_path} is config version {ev.config_version}, which containerd {v} "
            "cannot read",
            f"Use `version = 2` in {ev.config_path} (or upgrade to containerd 2.x).",
            **evidence,
        )
    cri = cri_state(ev)
    evidence.update(_cri_evidence(cri, ev))
    if cri.loaded is False:
        return failed(
            f"{cri.describe()}: containerd runs no pod (its config dump shows the merged "
            "config, not what started)",
            cri.fix(),
            **evidence,
        )
    if cri.loaded and cri.broken_rules:
        r = cri.broken_rules[0]
        return failed(
            f"containerd runs with its CRI plugin loaded ({cri.source}), but the config as "
            f"it is now makes {r.plugin} refuse to load at the next restart: {r.message}",
            cri.fix(),
            **evidence,
        )
    if cri.loaded is None:
        return skipped(
            "whether containerd's CRI plugin loads this config could not be checked: "
            + "; ".join(r.message for r in cri.unchecked_rules),
            **evidence,
        )
    if ev.missing_imports:
        return warned(
            "imports matched no collected file: " + ", ".join(ev.missing_imports),
            "Check the `imports` list of the containerd config; kgc collects imports under "
            "the config's directory (conf.d/, config.d/).",
            **evidence,
        )
    if ev.dump is None and not ev.offline:
        return warned(
            f"judging the file only; the effective config could not be read: {ev.dump_error}",
            f"Make `{profile.runtime.containerd_bin} config dump` work on the node.",
            **evidence,
        )
    seen = "" if ev.plugins is not None else f" (the plugin list: {ev.plugins_error})"
    return passed(
        f"config version {ev.config_version}, judged from {ev.effective_source}; "
        f"{cri.describe()}{seen}",
        **evidence,
    )


def _cri_evidence(cri: CriLoad, ev: RuntimeEvidence) -> dict[str, Any]:
    """What says whether CRI started: containerd's plugin list, its log, the load rules."""
    out: dict[str, Any] = {"cri_loaded": cri.loaded, "cri_source": cri.source,
                           "cri_load_rules": cri.evidence.get("rules", [])}
    if cri.error:
        out["cri_error"] = f"{cri.plugin}: {cri.error}"
    if "plugins" in cri.evidence:
        out["cri_plugins"] = cri.evidence["plugins"]
    if ev.plugins is None:
        out["plugins_error"] = ev.plugins_error
    if ev.log_error:
        out["log_error"] = ev.log_error
    edits = [e.to_dict() for r in cri.broken_rules for e in r.edits]
    if edits:
        out["config_edits"] = edits
    return out


def _nri_fix(ev: RuntimeEvidence, profile: Profile) -> tuple[str, list[dict[str, Any]]]:
    """The remedy that enables NRI in THIS config (edit the table that is there)."""
    edits = nri_edits(ev, profile.runtime.nri_socket, DEFAULT_NRI_SOCKET)
    return (f"{render_edits(edits)}\n— then restart containerd (`systemctl restart "
            "containerd`)", [e.to_dict() for e in edits])


def _ignored_files(ev: RuntimeEvidence) -> list:
    return [ev.main, *ev.imports]


@CHECKS.check(
    "runtime.nri-enabled",
    title="NRI is enabled in containerd by its real semantics (not by keys it ignores)",
    remediation=f"Add to the containerd config and restart containerd:\n{nri_enable_snippet()}",
    severity=Severity.BLOCKER,
)
def nri_enabled(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    st = nri_state(ev)
    ign = ignored_keys(_ignored_files(ev))
    evidence: dict[str, Any] = dict(st.evidence)
    evidence["ignored_keys"] = [f"{k.file}: {k.section} {k.key}" for k in ign]
    if st.enabled:
        return passed(f"NRI is enabled: {st.why}", **evidence)
    if not profile.runtime.require_nri:
        return skipped(
            f"the profile does not require NRI (runtime.require_nri: false); {st.why}", **evidence
        )
    reason = f"NRI is {'off' if st.enabled is False else 'not certainly on'}: {st.why}"
    nri_ign = [k for k in ign if "nri" in k.key.lower() or k.section == NRI_SECTION]
    if nri_ign:
        k = nri_ign[0]
        reason += (
            f". `{k.key}` under {k.section} in {k.file} is ignored by containerd (it is CRI-O's "
            f"key); what really enables NRI is `disable = false` in {NRI_SECTION}"
        )
    remedy, evidence["config_edits"] = _nri_fix(ev, profile)
    return failed(reason, remedy, **evidence)


@CHECKS.check(
    "runtime.nri-ignored-keys",
    title="No NRI keys that containerd silently ignores (e.g. enable_nri under the CRI plugin)",
    remediation="Delete the ignored keys; enable NRI with `disable = false` in "
    f'[plugins."{NRI_PLUGIN}"].',
    severity=Severity.MINOR,
)
def nri_ignored_keys(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    files = [f for f in _ignored_files(ev) if f.text is not None]
    if not files:
        return skipped(f"no containerd config file to inspect ({ev.main.path} does not exist)")
    ign = ignored_keys(_ignored_files(ev))
    if not ign:
        return passed(
            "no ignored NRI keys in the containerd config files: "
            + ", ".join(f.path for f in files)
        )
    lines = [f"{k.file}: {k.section} {k.key} — {k.why}" for k in ign]
    said = [str(w) for w in ev.warnings if any(w.key == k.key for k in ign)]
    first = ign[0]
    st = nri_state(ev)
    nri_now = (f"NRI itself is already on ({st.why})" if st.enabled
               else "to enable NRI: " + _nri_fix(ev, profile)[0])
    return warned(
        f"containerd ignores `{first.key}` under {first.section} in {first.file}"
        + (f" (and {len(ign) - 1} more)" if len(ign) > 1 else "")
        + f"; it does not enable NRI — `disable = false` in {NRI_SECTION} does",
        f"Remove `{first.key}` from {first.section} in {first.file} (it is CRI-O's "
        f"`[crio.nri]` key); {nri_now}",
        ignored=lines,
        containerd_says=said,
    )


@CHECKS.check(
    "runtime.nri-socket",
    title="The NRI socket exists, is a socket, owned by root and not writable by others",
    remediation="Enable NRI with connections allowed and restart containerd.",
    severity=Severity.CRITICAL,
)
def nri_socket(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    st = nri_state(ev)
    path = st.socket_path
    evidence: dict[str, Any] = {
        "socket_path": path,
        "profile_socket": profile.runtime.nri_socket,
        **st.evidence,
    }
    if ev.offline and not (st.enabled and st.connections is False):
        state = (f"the configuration enables NRI with connections ({st.why})" if st.enabled
                 else f"NRI in this image: {st.why} (judged by runtime.nri-enabled)")
        return skipped(
            f"offline tree: {path} exists only while containerd runs, so the socket itself "
            f"cannot be judged; {state}",
            **evidence,
        )
    if not st.enabled:
        if not profile.runtime.require_nri:
            return skipped("NRI is not enabled and the profile does not require it", **evidence)
        remedy, evidence["config_edits"] = _nri_fix(ev, profile)
        return failed(
            f"no NRI socket: NRI is not enabled ({st.why})",
            "Enable NRI (see runtime.nri-enabled): " + remedy,
            **evidence,
        )
    if st.connections is False:
        return failed(
            f"{NRI_SECTION} sets disable_connections = true: containerd opens no socket, so "
            "external NRI plugins (device plugins, the kgc probe) cannot connect",
            f"Set `disable_connections = false` (or delete the key) in {NRI_SECTION} of "
            f"{ev.config_path} and restart containerd.",
            **evidence,
        )
    s = ev.stats.get(path)
    if s is None:
        cri = cri_state(ev)
        if cri.loaded is False:
            evidence.update(_cri_evidence(cri, ev))
            return failed(
                f"NRI is enabled in the config but {path} does not exist: {cri.describe()}, "
                "and containerd opens the NRI socket only with its CRI plugin (checked on "
                "containerd 1.7.24 and 2.1.9)",
                cri.fix(),
                **evidence,
            )
        ctd = ev.stats.get(CONTAINERD_SOCKET)
        if ctd is None and ev.plugins is None:  # a plugin list means containerd answered
            return failed(
                f"NRI is enabled in the config but {path} does not exist: containerd is not "
                f"running ({CONTAINERD_SOCKET} is absent too)",
                "Start containerd (`systemctl start containerd`; check "
                "`systemctl status containerd` and `journalctl -u containerd` if it does not "
                "stay up); it creates the NRI socket at start.",
                **evidence,
            )
        running = ("it answered `ctr plugins ls`" if ev.plugins is not None
                   else f"{CONTAINERD_SOCKET} is there")
        return failed(
            f"NRI is enabled in the config but {path} does not exist while containerd runs "
            f"({running}): containerd was not restarted since the config changed, or its "
            "NRI plugin failed to start",
            "Restart containerd (`systemctl restart containerd`) and check its log for "
            '"nri" errors (`journalctl -u containerd | grep -i nri`).',
            **evidence,
        )
    evidence.update(kind=s.kind, mode=s.mode, owner=s.owner, group=s.group)
    if s.kind != "socket":
        return failed(
            f"{path} is a {s.kind}, not a socket",
            f"Remove {path} and restart containerd.",
            **evidence,
        )
    try:
        mode = int(s.mode, 8)
    except ValueError:
        mode = 0o777
    if s.owner != "root" or mode & 0o002:
        return failed(
            f"{path} is owned by {s.owner}:{s.group} mode {s.mode}: any local user who can write "
            "to it can register an NRI plugin and change every container",
            f"chown root:root {path} && chmod 0600 {path} (containerd creates it that way).",
            **evidence,
        )
    if path != profile.runtime.nri_socket:
        return warned(
            f"NRI socket is {path}, but the profile expects {profile.runtime.nri_socket} "
            "(plugins using the default path will not find it)",
            f'Set socket_path = "{profile.runtime.nri_socket}" in {NRI_SECTION}, or set '
            f"runtime.nri_socket: {path} in the profile.",
            **evidence,
        )
    return passed(f"{path}: socket, {s.owner}:{s.group} mode {s.mode}", **evidence)


def _kata_handler(ev: RuntimeEvidence, profile: Profile):  # type: ignore[no-untyped-def]
    pl = place_handler(ev, profile.runtime.kata_handler)
    return pl.handler, pl.found, pl


@CHECKS.check(
    "runtime.kata-handler",
    title="The Kata runtime handler is wired in containerd under the right section",
    remediation="Add the Kata runtime handler to the containerd config and restart containerd.",
    severity=Severity.BLOCKER,
)
def kata_handler(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    """Judged against what the containerd binary loads: its ``config dump`` when it
    answered (a version-2 file on containerd 2.x is migrated, so the handler shows up in
    the version-3 section), else the file read as that containerd version reads it."""
    name = profile.runtime.kata_handler
    h, found, pl = _kata_handler(ev, profile)
    cv = ev.config_version
    evidence: dict[str, Any] = {
        "handler": name,
        "config_version": cv,
        "handlers": {k: v.runtime_type for k, v in found.items()},
        "config_source": ev.effective_source,
        "judged_against": pl.basis,
        "containerd_says": [str(w) for w in pl.warnings],
    }
    snippet = handler_snippet(cv, name)
    cri = cri_state(ev)
    if cri.loaded is False:
        evidence.update(_cri_evidence(cri, ev))
        where = (f"handler {name!r} is configured in {h.section}" if h is not None
                 else f"no runtime handler {name!r} either")
        return failed(
            f"{cri.describe()}: containerd runs no pod, with this or any handler ({where})",
            cri.fix(),
            **evidence,
        )
    if h is None:
        target = snippet.split("\n", 1)[0]
        if pl.misplaced and pl.misplaced == target:
            return failed(
                f"handler {name!r} is in {pl.misplaced} of {pl.misplaced_file}, the section "
                f"containerd reads, but what containerd loaded ({pl.basis}) lacks it: a later "
                "import that defines this plugin's section replaces the whole section",
                "Keep the handler where it is; put it in the file that defines the plugin's "
                "section last (containerd merges imports plugin section by plugin section), "
                "then restart containerd.",
                **evidence,
            )
        if pl.misplaced:
            said = f"; containerd says: {pl.warnings[-1]}" if pl.warnings else ""
            return failed(
                f"handler {name!r} is under {pl.misplaced} in {pl.misplaced_file}, which "
                f"containerd does not read in a version-{cv} config (judged on {pl.basis})"
                f"{said}",
                f"Move it (config version {cv}) to:\n{snippet}",
                **evidence,
            )
        katas = [k for k, v in found.items() if v.runtime_type == KATA_RUNTIME_TYPE]
        reason = f"no runtime handler {name!r} in {ev.effective_source}"
        if pl.warnings:
            reason += f"; containerd says: {pl.warnings[-1]}"
        remedy = f"Add to {ev.config_path} and restart containerd:\n{snippet}"
        if katas:
            reason += f"; Kata handlers present: {', '.join(katas)}"
            remedy += (
                f"\n— or, if the RuntimeClass uses {katas[0]!r}, set platform.kata.handler: "
                f"{katas[0]} in the profile."
            )
        return failed(reason, remedy, **evidence)
    evidence["section"] = h.section
    evidence["options"] = dict(h.options)
    if h.runtime_type != KATA_RUNTIME_TYPE:
        return failed(
            f"handler {name!r} has runtime_type {h.runtime_type!r}, not {KATA_RUNTIME_TYPE!r}",
            f'Set runtime_type = "{KATA_RUNTIME_TYPE}" in {h.section}.',
            **evidence,
        )
    if cri.loaded is None:  # the handler is right, but will containerd serve CRI at all?
        evidence.update(_cri_evidence(cri, ev))
        return skipped(
            f"handler {name!r} is in {h.section} with runtime_type {KATA_RUNTIME_TYPE}, but "
            "whether containerd's CRI plugin loads this config could not be checked: "
            + "; ".join(r.message for r in cri.unchecked_rules),
            **evidence,
        )
    return passed(
        f"handler {name!r} (the profile's RuntimeClass handler) in {h.section} with runtime_type "
        f"{KATA_RUNTIME_TYPE} (judged on {pl.basis})",
        **evidence,
    )


def _shim_problem(ev: RuntimeEvidence, path: str) -> str | None:
    """Why the file at ``path`` cannot be run as the shim (None: it can)."""
    st = ev.stats.get(path)
    if st is None:
        return None  # found by `command -v` on the node's PATH: only executables are
    if st.dangling:
        return "a dangling symbolic link (its target does not exist)"
    kind, _mode, size = st.resolved()
    if kind is None:
        return "a symbolic link whose target was not recorded (old evidence)"
    if not kind.startswith("regular"):
        return f"a {kind}, not a regular file"
    problems = []
    if size == 0 or kind == "regular empty file":
        problems.append("empty (0 bytes)")
    if st.executable() is False:
        problems.append(f"not executable (mode {st.resolved()[1]})")
    return " and ".join(problems) or None


@CHECKS.check(
    "runtime.kata-shim",
    title=f"The Kata shim ({KATA_SHIM}) is on the node",
    remediation=f"Install Kata Containers (kata-deploy or packages) so that {KATA_SHIM} is on "
    "containerd's PATH (e.g. /usr/local/bin).",
    severity=Severity.CRITICAL,
)
def kata_shim(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    """The shim must be a non-empty executable regular file (a link to one counts; a
    dangling link, an empty or non-executable file does not)."""
    h, _, _ = _kata_handler(ev, profile)
    evidence: dict[str, Any] = {
        "found": list(ev.shim_found),
        "searched": list(profile.runtime.shim_dirs),
    }
    bad: dict[str, str] = {}
    if h is not None and h.runtime_path:
        evidence["runtime_path"] = h.runtime_path
        if h.runtime_path in ev.shim_found or h.runtime_path in ev.stats:
            why = _shim_problem(ev, h.runtime_path)
            if why is None:
                return passed(f"runtime_path {h.runtime_path} of handler {h.name!r} is an "
                              "executable file", **evidence)
            bad[h.runtime_path] = why
    for p in ev.shim_found:
        why = _shim_problem(ev, p)
        if why is None:
            st = ev.stats.get(p)
            via = (f" (link to {st.target_kind})" if st is not None and st.is_link else "")
            return passed(f"{KATA_SHIM} at {p}{via}: an executable file", **evidence)
        bad[p] = why
    evidence["unusable"] = bad
    if bad:
        p, why = next(iter(bad.items()))
        st = ev.stats.get(p)
        target = f" -> {ev.links[p]}" if st is not None and st.is_link and p in ev.links else ""
        return failed(
            f"{p}{target} is {why}: containerd cannot start the Kata shim"
            + (f" (and {len(bad) - 1} more unusable)" if len(bad) > 1 else ""),
            f"Reinstall Kata so that {p} is the real shim binary (kata-deploy puts it in "
            f"/opt/kata/bin): ln -sf /opt/kata/bin/{KATA_SHIM} /usr/local/bin/{KATA_SHIM}",
            **evidence,
        )
    return failed(
        f"{KATA_SHIM} is not on PATH nor in {', '.join(profile.runtime.shim_dirs)}",
        f"Install Kata and link the shim: "
        f"ln -s /opt/kata/bin/{KATA_SHIM} /usr/local/bin/{KATA_SHIM}",
        **evidence,
    )


def _kata(ev: RuntimeEvidence, profile: Profile):  # type: ignore[no-untyped-def]
    h, _, _ = _kata_handler(ev, profile)
    return kata_config(ev, h, profile.runtime.kata_config_paths)


@CHECKS.check(
    "runtime.kata-config",
    title="Kata's configuration file is found and parses (sizing keys captured)",
    remediation="Install Kata's configuration (kata-deploy writes /opt/kata/share/defaults/"
    "kata-containers/...) or point the handler's ConfigPath option at it.",
    severity=Severity.CRITICAL,
)
def kata_cfg(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    kc = _kata(ev, profile)
    evidence: dict[str, Any] = {
        "path": kc.path,
        "chosen_because": kc.chosen_because,
        "searched": list(kc.searched),
        "dropins": list(kc.dropins),
    }
    if kc.error:
        return failed(kc.error, f"Fix the TOML syntax of {kc.path}.", **evidence)
    if kc.path is None:
        return failed(
            f"no Kata configuration: {kc.chosen_because}; searched {', '.join(kc.searched)}",
            **evidence,
        )
    hvs = hypervisors(kc.data)
    annotations = {n: hv.get("enable_annotations", []) for n, hv in hvs.items()}
    evidence.update(
        hypervisors=sorted(hvs), enable_annotations=annotations, sizing=sizing_evidence(kc.data)
    )
    if not hvs:
        return failed(f"{kc.path} has no [hypervisor.*] section", **evidence)
    return passed(
        f"{kc.path} ({kc.chosen_because}); hypervisor {', '.join(sorted(hvs))}", **evidence
    )


KATA_ROOT_PORTS = 8  # what Kata's NVIDIA configs set (kata-containers src/runtime/Makefile)


def _vfio_results(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each hypervisor's VFIO plug keys, as Kata reads the merged configuration."""
    return {
        name: {
            "cold_plug_vfio": hv.get("cold_plug_vfio"),
            "hot_plug_vfio": hv.get("hot_plug_vfio"),
            "pcie_root_port": hv.get("pcie_root_port", 0),
            "pcie_switch_port": hv.get("pcie_switch_port"),
        }
        for name, hv in hypervisors(data).items()
    }


def _kata_layers(ev: RuntimeEvidence, kc: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """The Kata configuration's files in the order they merge (the base file, then its
    config.d drop-ins by name), each with what it sets."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for path in (kc.path, *kc.dropins):
        f = ev.kata_files.get(path)
        if f is not None and f.text is not None and not f.error:
            out.append((path, f.data))
    return out


def _kata_edit(
    layers: list[tuple[str, Mapping[str, Any]]], hv: str, key: str, value: Any = None,
    delete: bool = False,
) -> list[Edit]:
    """``key`` of ``[hypervisor.<hv>]`` edited where its value comes from: the last file
    that sets it (a delete: every file that sets it); a key no file sets goes into the first
    file with that table."""
    table = ("hypervisor", hv)
    has = [(p, hypervisors(d).get(hv)) for p, d in layers]
    setters = [p for p, t in has if t is not None and key in t]
    if delete:
        return [Edit(p, table, key, delete=True, table_exists=True) for p in setters]
    if setters:
        return [Edit(setters[-1], table, key, value, table_exists=True)]
    having = [p for p, t in has if t is not None]
    if not having and not layers:
        return []
    return [Edit(having[0] if having else layers[0][0], table, key, value,
                 table_exists=bool(having))]


def _vfio_edits(
    layers: list[tuple[str, Mapping[str, Any]]], results: Mapping[str, Mapping[str, Any]]
) -> list[Edit]:
    """What plugs every hypervisor's VFIO devices on a PCIe root port, computed from the
    values there: an invalid or bridge port is changed in the key that sets it (with both
    keys set Kata uses hot_plug_vfio's port: virtcontainers/sandbox.go coldOrHotPlugVFIO, so
    adding cold_plug_vfio beside it would change nothing), cold_plug_vfio = "root-port" when
    neither key plugs, and pcie_root_port only when a root port has none."""
    edits: list[Edit] = []
    for name, r in results.items():
        ports = {k: r[k] for k in ("cold_plug_vfio", "hot_plug_vfio")}
        for k, v in list(ports.items()):
            if v is not None and (v not in VFIO_PORTS or v == "bridge-port"):
                edits += _kata_edit(layers, name, k, "root-port")
                ports[k] = "root-port"
        if all(v in (None, "no-port") for v in ports.values()):
            edits += _kata_edit(layers, name, "cold_plug_vfio", "root-port")
            ports["cold_plug_vfio"] = "root-port"
        n = r["pcie_root_port"]
        if "root-port" in ports.values() and not (isinstance(n, int) and n > 0):
            edits += _kata_edit(layers, name, "pcie_root_port", KATA_ROOT_PORTS)
    return edits


def _edits_text(edits: list[Edit], first: bool = True) -> str:
    text = render_edits(edits)
    if any(e.key == "pcie_root_port" and not e.delete for e in edits):
        text += " (pcie_root_port: at least one root port per GPU passed through to a pod)"
    return text[:1].upper() + text[1:] if first else text


@CHECKS.check(
    "runtime.kata-vfio",
    title="Kata plugs VFIO devices on a PCIe root port (cold_plug_vfio / hot_plug_vfio)",
    remediation='In the Kata config [hypervisor.qemu]: cold_plug_vfio = "root-port" and '
    "pcie_root_port = 8 (one port per GPU at least).",
    severity=Severity.CRITICAL,
)
def kata_vfio(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    kc = _kata(ev, profile)
    if kc.path is None or kc.error:
        return failed(
            f"no usable Kata configuration ({kc.error or kc.chosen_because})",
            "Fix runtime.kata-config first.",
            path=kc.path,
        )
    results = _vfio_results(kc.data)
    evidence: dict[str, Any] = {"path": kc.path, "hypervisors": results}
    edits = _vfio_edits(_kata_layers(ev, kc), results)
    if edits:
        evidence["config_edits"] = [e.to_dict() for e in edits]
    if not results:
        return failed(
            f"{kc.path} has no [hypervisor.*] section, so nothing says how Kata plugs a VFIO "
            "device into the VM",
            "Use the Kata configuration for your hypervisor (kata-deploy ships "
            "configuration-qemu-nvidia-gpu.toml) or point the handler's ConfigPath at it.",
            **evidence,
        )
    remedy = f"{_edits_text(edits)}." if edits else None  # None: the check's own text
    for name, r in results.items():
        for key in ("cold_plug_vfio", "hot_plug_vfio"):
            val = r[key]
            if val is not None and val not in VFIO_PORTS:
                return failed(
                    f"{kc.path}: [hypervisor.{name}] {key} = {val!r} is not one of "
                    f"{', '.join(VFIO_PORTS)}",
                    remedy,
                    **evidence,
                )
        plug = [
            (k, r[k]) for k in ("cold_plug_vfio", "hot_plug_vfio") if r[k] not in (None, "no-port")
        ]
        if not plug:
            return failed(
                f"{kc.path}: [hypervisor.{name}] sets neither cold_plug_vfio nor hot_plug_vfio "
                "to a port: a VFIO GPU would not be plugged into the VM",
                remedy,
                **evidence,
            )
        for k, v in plug:
            if v == "root-port" and not (
                isinstance(r["pcie_root_port"], int) and r["pcie_root_port"] > 0
            ):
                return failed(
                    f'{kc.path}: [hypervisor.{name}] {k} = "root-port" but pcie_root_port = '
                    f"{r['pcie_root_port']}: no root port to plug the GPU into",
                    remedy,
                    **evidence,
                )
            if v == "bridge-port":
                return warned(
                    f'{kc.path}: [hypervisor.{name}] {k} = "bridge-port": GPUs with large '
                    "BARs need a PCIe root port",
                    remedy,
                    **evidence,
                )
    desc = "; ".join(
        f"{n}: "
        + ", ".join(
            f"{k}={r[k]}"
            for k in ("cold_plug_vfio", "hot_plug_vfio", "pcie_root_port")
            if r[k] is not None
        )
        for n, r in results.items()
    )
    return passed(desc, **evidence)


STALE_KEYS = {
    "hotplug_vfio_on_root_bus": (
        'removed in Kata 3.18; use hot_plug_vfio / cold_plug_vfio = "root-port"'
    ),
}


@CHECKS.check(
    "runtime.kata-stale-keys",
    title="The Kata config carries no stale keys (e.g. hotplug_vfio_on_root_bus)",
    remediation="Delete stale keys from the Kata configuration.",
    severity=Severity.MINOR,
)
def kata_stale(ev: RuntimeEvidence, profile: Profile) -> Outcome:
    kc = _kata(ev, profile)
    if kc.path is None or kc.error:
        return skipped(
            f"no usable Kata configuration ({kc.error or kc.chosen_because})", path=kc.path
        )
    stale = []
    for name, hv in hypervisors(kc.data).items():
        for k, why in STALE_KEYS.items():
            if k in hv:
                stale.append(f"[hypervisor.{name}] {k} = {hv[k]!r}: {why}")
    if stale:
        layers = _kata_layers(ev, kc)
        drop = [e for name, hv in hypervisors(kc.data).items() for k in STALE_KEYS if k in hv
                for e in _kata_edit(layers, name, k, delete=True)]
        plug = _vfio_edits(layers, _vfio_results(kc.data))
        remedy = _edits_text(drop) if drop else f"Remove {', '.join(STALE_KEYS)} from {kc.path}"
        if plug:  # the same fix runtime.kata-vfio gives: one story for both checks
            remedy += f"; instead, as runtime.kata-vfio says: {_edits_text(plug, first=False)}"
        return warned(
            f"{kc.path}: " + "; ".join(stale),
            f"{remedy}.",
            path=kc.path,
            stale=stale,
            config_edits=[e.to_dict() for e in (*drop, *plug)],
        )
    return passed(f"{kc.path}: no stale keys", path=kc.path)
