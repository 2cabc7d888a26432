"""Boot-time binding configuration of a node: what the collector reads and pure parsers.

Shared by the ``vfio`` layer (which host driver may claim a device first) and the
``persistence`` layer (which mechanism binds each device at the next boot).
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgc.core.hostfs import HostQuery, HostSnapshot

if TYPE_CHECKING:
    from kgc.evidence.pci import PciDevice

MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")
MODULES_LOAD_DIRS = (
    "/etc/modules-load.d",
    "/run/modules-load.d",
    "/usr/lib/modules-load.d",
    "/lib/modules-load.d",
)
UDEV_DIRS = ("/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d")
BOOT_CONFIGS = (
    "/etc/default/grub",
    "/etc/default/grub.d/*.cfg",
    "/boot/grub/grub.cfg",
    "/boot/grub2/grub.cfg",
    "/etc/kernel/cmdline",
    "/boot/loader/entries/*.conf",
    "/efi/loader/entries/*.conf",
    "/boot/efi/loader/entries/*.conf",
)
DRIVERCTL_DIR = "/etc/driverctl.d"
VFIO_DRIVERS = ("vfio_pci", "vfio-pci")

# For every PCI device its modalias ("D bdf alias"), and once per distinct modalias the
# kernel modules whose aliases match it ("A alias modules...": what udev would load).
# Read-only; one modprobe per distinct device model, not per device. It resolves against the
# module index of the kernel that boots: the running one on a node, the tree's own
# /lib/modules/<version> on an offline tree (never the host's). Without modprobe or without
# a module index it says so and exits non-zero: the answer is unknown, not "no driver".
MODALIAS_CMD = (
    "command -v modprobe >/dev/null 2>&1 || "
    "{ echo 'KGC-NO-MODPROBE modprobe is not installed on the node'; exit 4; }; "
    'if [ -n "$R" ]; then k=; for x in "$R"/lib/modules/*/modules.alias.bin; do '
    '[ -r "$x" ] || continue; k=${x%/modules.alias.bin}; k=${k##*/}; break; done; '
    '[ -n "$k" ] || { echo "KGC-NO-MODULE-INDEX no /lib/modules/*/modules.alias.bin in the '
    'tree"; exit 5; }; set -- -d "$R" -S "$k"; else k=$(uname -r); '
    '[ -r "/lib/modules/$k/modules.alias.bin" ] || [ -r "/lib/modules/$k/modules.alias" ] || '
    '{ echo "KGC-NO-MODULE-INDEX no module index for kernel $k in /lib/modules/$k"; exit 5; }; '
    "set --; fi; "
    "seen=' '; for d in \"$R\"/sys/bus/pci/devices/*; do [ -r \"$d/modalias\" ] || continue; "
    'IFS= read -r a < "$d/modalias" || continue; printf \'D %s %s\\n\' "${d##*/}" "$a"; '
    'case "$seen" in *" $a "*) continue;; esac; seen="$seen$a "; '
    'printf \'A %s %s\\n\' "$a" "$(modprobe "$@" -qR "$a" 2>/dev/null | tr \'\\n\' \' \')"; done'
)
# The initramfs the running kernel boots with: its module and modprobe config entries.
# lsinitramfs unpacks the archive through unmkinitramfs into ${TMPDIR:-/var/tmp}: it gets a
# temporary directory of its own (kgc-initramfs.*), removed afterwards whatever happens, so
# the listing writes nothing else on the node. On an offline tree the tree's own kernel
# version is used when it has one.
INITRAMFS_CMD = (
    'if [ -r "$R/proc/sys/kernel/osrelease" ]; then k=$(cat "$R/proc/sys/kernel/osrelease"); '
    "else k=$(uname -r); fi; "
    't=$(mktemp -d "${TMPDIR:-/tmp}/kgc-initramfs.XXXXXX") || '
    "{ echo 'KGC-NO-TMPDIR cannot create a temporary directory'; exit 6; }; "
    "trap 'rm -rf \"$t\"' EXIT; trap 'exit 7' HUP INT TERM; n=0; "
    'for f in "$R/boot/initrd.img-$k" "$R/boot/initramfs-$k.img"; do '
    '[ -r "$f" ] || continue; n=1; echo "# image ${f#"$R"}"; '
    'if command -v lsinitramfs >/dev/null 2>&1; then TMPDIR="$t" lsinitramfs "$f"; '
    'elif command -v lsinitrd >/dev/null 2>&1; then TMPDIR="$t" lsinitrd "$f"; '
    'else echo "KGC-NO-LSINITRAMFS"; exit 4; fi | '
    "grep -E '[.]ko([.](xz|zst|gz))?$|modprobe[.]d/|modules-load[.]d/|conf/modules$|driverctl'; "
    'done; [ "$n" = 1 ] || { echo KGC-NO-INITRAMFS; exit 3; }'
)

# Only the udev rule lines that set driver_override (the full rule set is ~100 KB of noise).
# grep runs inside the root with relative names, so the file names come back without the
# root prefix whatever the root is called (KGC_ROOT is never pasted into a sed or awk
# program: it is data, not code). Exit 0 also when nothing matches.
UDEV_CMD = (
    'cd "${R:-/}" && grep -sH driver_override '
    + " ".join(f"{d.lstrip('/')}/*.rules" for d in UDEV_DIRS)
    + " | while IFS= read -r l; do printf '/%s\\n' \"$l\"; done; true"
)

CONFIG_QUERY = HostQuery(
    files=(
        *(f"{d}/*.conf" for d in MODPROBE_DIRS),
        *(f"{d}/*.conf" for d in MODULES_LOAD_DIRS),
        "/etc/modules",
        "/etc/initramfs-tools/modules",
        "/etc/dracut.conf",
        "/etc/dracut.conf.d/*.conf",
        *BOOT_CONFIGS,
        f"{DRIVERCTL_DIR}/*",
        "/proc/cmdline",
        "/sys/bus/pci/devices/*/modalias",
    ),
    dirs=("/sys/module", "/dev/vfio", "/dev/vfio/devices", "/sys/bus/pci/devices/*/vfio-dev",
          DRIVERCTL_DIR, "/sys/class/iommu"),
    commands=(
        ("pci_modalias_drivers", MODALIAS_CMD),
        ("initramfs_list", INITRAMFS_CMD),
        ("udev_driver_override", UDEV_CMD),
    ),
)


def mod(name: str) -> str:
    """Module names are the same with '-' and '_' (vfio-pci == vfio_pci)."""
    return name.strip().replace("-", "_")


@dataclass(frozen=True)
class IdRule:
    """``vendor:device[:subvendor:subdevice]`` as in ``vfio-pci ids=`` (omitted = any)."""

    vendor: str
    device: str
    subvendor: str | None = None
    subdevice: str | None = None

    @classmethod
    def parse(cls, text: str) -> IdRule | None:
        parts = [p.strip().lower().removeprefix("0x") for p in text.split(":")]
        if len(parts) < 2 or not all(re.fullmatch(r"[0-9a-f]{1,8}", p) for p in parts[:4]):
            return None

        def norm(p: str) -> str | None:
            return None if p in ("ffffffff", "") else p.rjust(4, "0")[-4:]

        v, d = norm(parts[0]), norm(parts[1])
        if v is None or d is None:
            return None
        sv = norm(parts[2]) if len(parts) > 2 else None
        sd = norm(parts[3]) if len(parts) > 3 else None
        return cls(v, d, sv, sd)

    def matches(self, vendor: str | None, device: str | None, subvendor: str | None = None,
                subdevice: str | None = None) -> bool:
        if vendor != self.vendor or device != self.device:
            return False
        if self.subvendor is not None and subvendor != self.subvendor:
            return False
        return not (self.subdevice is not None and subdevice != self.subdevice)

    def __str__(self) -> str:
        s = f"{self.vendor}:{self.device}"
        if self.subvendor:
            s += f":{self.subvendor}"
        if self.subdevice:
            s += f":{self.subdevice}"
        return s


def parse_ids(value: str) -> tuple[IdRule, ...]:
    out = []
    for item in value.split(","):
        r = IdRule.parse(item)
        if r is not None:
            out.append(r)
    return tuple(out)


@dataclass(frozen=True)
class ModprobeConfig:
    """modprobe.d as modprobe reads it: /etc overrides same-named files in /run, /lib."""

    files: tuple[str, ...] = ()
    # module -> list of (file, options string)
    options: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # module -> (file, pre-modules)
    softdeps_pre: Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(
        default_factory=dict)
    blacklist: Mapping[str, str] = field(default_factory=dict)  # module -> file
    install_disabled: Mapping[str, str] = field(default_factory=dict)  # install x /bin/false
    # (file, command, module, logical line) in the order modprobe reads them: what a fix
    # edits in place (the line that is there) instead of appending a duplicate
    lines: tuple[tuple[str, str, str, str], ...] = ()

    def line_of(self, command: str, module: str) -> tuple[str, str] | None:
        """(file, line) of the first ``command`` line for ``module`` (the one kmod uses)."""
        m = mod(module)
        return next(((f, ln) for f, c, mm, ln in self.lines if c == command and mm == m), None)

    def vfio_ids_assignments(self) -> tuple[tuple[str, str], ...]:
        """(file, value) of every ``ids=`` of vfio-pci in modprobe.d, in the order modprobe
        reads them (see :meth:`vfio_ids`)."""
        return tuple((path, v) for path, opts in self.options.get("vfio_pci", ())
                     for v in ids_assignments(_words(opts)))

    def vfio_ids(self) -> tuple[tuple[str, IdRule], ...]:
        """(file, rule) of the ``ids=`` that takes effect: the LAST assignment modprobe.d
        makes, not every one. libkmod's ``kmod_module_get_options()`` (kmod-project/kmod,
        libkmod/libkmod-module.c) joins every ``options`` line of the module with a space,
        in the order the files are read (sorted by basename across the modprobe.d
        directories, /etc hiding a same-named file: :func:`parse_modprobe`), and the kernel
        sets the parameters in that order; vfio-pci's ``ids`` is a string parameter
        (drivers/vfio/pci/vfio_pci.c: ``module_param_string(ids, ids, sizeof(ids), 0)``,
        set by ``param_set_copystring``, kernel/params.c), so each assignment replaces the
        previous one. An empty ``ids=`` is an assignment too (it leaves no id). The rules of
        earlier assignments: :meth:`vfio_ids_shadowed`.

        modprobe.d only: ``kmod_config_new()`` (libkmod/libkmod-config.c) adds the kernel
        command line's ``vfio-pci.ids=`` after every file, so it replaces this one too
        (:func:`modprobe_ids`); and a vfio-pci built into the kernel reads the command line
        alone (this configuration says nothing about that case)."""
        last = self.vfio_ids_assignments()[-1:]
        return tuple((path, r) for path, v in last for r in parse_ids(v))

    def vfio_ids_shadowed(self) -> tuple[tuple[str, IdRule, str], ...]:
        """(file, rule, shadowing file): every rule of an ``ids=`` that a later one (in the
        file named last) replaces, so it binds nothing (see :meth:`vfio_ids`)."""
        every = self.vfio_ids_assignments()
        if len(every) < 2:
            return ()
        last = every[-1][0]
        return tuple((path, r, last) for path, v in every[:-1] for r in parse_ids(v))

    def vfio_ids_line(self) -> tuple[str, str] | None:
        """(file, line) of the ``options vfio-pci`` line whose ``ids=`` takes effect (the
        last one that has one), None when no line sets ids=."""
        return next(((f, ln) for f, c, m, ln in reversed(self.lines)
                     if c == "options" and m == "vfio_pci"
                     and ids_assignments(_words(" ".join(ln.split()[2:])))), None)

    def pre_of(self, module: str) -> set[str]:
        """The pre: modules of ``module``'s softdep. Only the FIRST softdep line for a module
        counts: libkmod's kmod_module_get_softdeps() stops at the first match ("find only
        the first command, as modprobe from module-init-tools does", kmod
        libkmod/libkmod-module.c), so a second line appended for the same module is
        ignored."""
        first = self.softdeps_pre.get(mod(module), ())[:1]
        return {mod(p) for _f, pres in first for p in pres}

    def vfio_first(self, module: str) -> str | None:
        """How vfio-pci wins over ``module`` at load time (None: nothing makes it win)."""
        m = mod(module)
        if "vfio_pci" in self.pre_of(m):
            return f"softdep {m} pre: vfio-pci ({self.softdeps_pre[m][0][0]})"
        if m in self.blacklist:
            return f"blacklist {m} ({self.blacklist[m]})"
        if m in self.install_disabled:
            return f"install {m} disabled ({self.install_disabled[m]})"
        return None


def _words(opts: str) -> list[str]:
    try:
        return shlex.split(opts)
    except ValueError:
        return opts.split()


def ids_assignments(words: Iterable[str]) -> list[str]:
    """The values of the ``ids=`` words among a module's option words, in order (the
    kernel keeps the last one; a bare ``ids`` without ``=`` sets nothing)."""
    return [w[len("ids="):] for w in words if w.startswith("ids=")]


def _effective(snap: HostSnapshot, dirs: Iterable[str], suffix: str) -> list[str]:
    """systemd/kmod precedence: a basename in an earlier dir hides later ones."""
    seen: dict[str, str] = {}
    for d in dirs:
        for p in snap.glob(f"{d}/*{suffix}"):
            base = p.rsplit("/", 1)[1]
            seen.setdefault(base, p)
    return [seen[b] for b in sorted(seen)]


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = (buf + line).strip()
        buf = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def parse_modprobe(snap: HostSnapshot) -> ModprobeConfig:
    files = _effective(snap, MODPROBE_DIRS, ".conf")
    options: dict[str, list[tuple[str, str]]] = {}
    softdeps: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    blacklist: dict[str, str] = {}
    disabled: dict[str, str] = {}
    lines: list[tuple[str, str, str, str]] = []
    for path in files:
        for line in _logical_lines(snap.read(path) or ""):
            words = line.split()
            if len(words) < 2:
                continue
            cmd, m = words[0], mod(words[1])
            lines.append((path, cmd, m, line))
            if cmd == "options":
                options.setdefault(m, []).append((path, " ".join(words[2:])))
            elif cmd == "softdep":
                pres: list[str] = []
                mode = None
                for w in words[2:]:
                    if w in ("pre:", "post:"):
                        mode = w
                    elif mode == "pre:":
                        pres.append(mod(w))
                softdeps.setdefault(m, []).append((path, tuple(pres)))
            elif cmd == "blacklist":
                blacklist.setdefault(m, path)
            elif cmd == "install" and len(words) >= 3 and words[2] in ("/bin/false", "/bin/true",
                                                                       "/usr/bin/false",
                                                                       "/usr/bin/true"):
                disabled.setdefault(m, path)
    return ModprobeConfig(
        files=tuple(files),
        options={k: tuple(v) for k, v in options.items()},
        softdeps_pre={k: tuple(v) for k, v in softdeps.items()},
        blacklist=blacklist,
        install_disabled=disabled,
        lines=tuple(lines),
    )


def parse_modules_load(snap: HostSnapshot) -> dict[str, str]:
    """module -> file that loads it at boot (modules-load.d and /etc/modules)."""
    out: dict[str, str] = {}
    paths = _effective(snap, MODULES_LOAD_DIRS, ".conf")
    if snap.read("/etc/modules") is not None:
        paths.append("/etc/modules")
    for p in paths:
        for line in _logical_lines(snap.read(p) or ""):
            if line.startswith(";"):
                continue
            out.setdefault(mod(line.split()[0]), p)
    return out


def modalias_error(snap: HostSnapshot) -> str:
    """Why the modalias drivers could not be resolved ("" when they were)."""
    res = snap.command("pci_modalias_drivers")
    if res is None:
        return "the modalias -> driver lookup was not collected"
    if res.rc == 0:
        return ""
    for marker in ("KGC-NO-MODPROBE", "KGC-NO-MODULE-INDEX"):
        for line in res.output.splitlines():
            if line.startswith(marker):
                return line[len(marker):].strip()
    return f"`modprobe -R` failed on the node (exit {res.rc})"


def parse_modalias_drivers(snap: HostSnapshot) -> dict[str, tuple[str, ...]] | None:
    """bdf -> modules whose aliases match the device (None when not resolved)."""
    res = snap.command("pci_modalias_drivers")
    if res is None or res.rc != 0:
        return None
    dev: dict[str, str] = {}
    mods: dict[str, tuple[str, ...]] = {}
    for line in res.output.splitlines():
        kind, _, rest = line.strip().partition(" ")
        key, _, val = rest.partition(" ")
        if kind == "D" and key:
            dev[key] = val.strip()
        elif kind == "A" and key:
            mods[key] = tuple(dict.fromkeys(mod(x) for x in val.split() if x))
    return {b: mods.get(a, ()) for b, a in dev.items()}


# -- kernel command line: running and configured ------------------------------------------
_GRUB_VAR = re.compile(r'^\s*(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)\s*=\s*(.*)$')


def cmdline_words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def cmdline_ids_values(words: Iterable[str]) -> list[str]:
    """The value of every ``vfio-pci.ids=`` (``vfio_pci.ids=``) of a command line, in order."""
    return [v for w in words for k, eq, v in [w.partition("=")]
            if eq and k in ("vfio-pci.ids", "vfio_pci.ids")]


def vfio_ids_in(words: Iterable[str]) -> tuple[IdRule, ...]:
    """The vfio-pci ids a kernel command line sets: its LAST ``vfio-pci.ids=``. For a
    modular vfio-pci, libkmod adds each one as an option after every modprobe.d line
    (``kmod_config_parse_kcmdline()``, called last by ``kmod_config_new()``, kmod
    libkmod/libkmod-config.c); a built-in one gets them from the kernel's own parameter
    parsing, in the same order; either way each assignment replaces the previous one (see
    :meth:`ModprobeConfig.vfio_ids`)."""
    vals = cmdline_ids_values(words)
    return parse_ids(vals[-1]) if vals else ()


@dataclass(frozen=True)
class BootConfig:
    """Kernel command lines the boot loader will use (per source file)."""

    sources: Mapping[str, str] = field(default_factory=dict)  # file -> command line text

    def ids(self) -> tuple[tuple[str, IdRule], ...]:
        """(file, rule) of the vfio-pci ids each file's command line sets (its last
        ``vfio-pci.ids=``: :func:`vfio_ids_in`)."""
        return tuple((f, r) for f, line in self.sources.items() for r in vfio_ids_in(
            cmdline_words(line)))

    def ids_sources(self) -> tuple[str, ...]:
        """The files whose command line sets ``vfio-pci.ids=`` (an empty value too): on the
        command line the next boot uses, it replaces every modprobe.d ``ids=``."""
        return tuple(f for f, line in self.sources.items()
                     if cmdline_ids_values(cmdline_words(line)))

    def ids_shadowed(self) -> tuple[tuple[str, IdRule], ...]:
        """(file, rule) of a ``vfio-pci.ids=`` that a later one on the same command line
        replaces."""
        return tuple((f, r) for f, line in self.sources.items()
                     for v in cmdline_ids_values(cmdline_words(line))[:-1]
                     for r in parse_ids(v))


def parse_boot_config(snap: HostSnapshot) -> BootConfig:
    sources: dict[str, str] = {}
    grub_default: list[str] = []
    for p in ["/etc/default/grub", *snap.glob("/etc/default/grub.d/*.cfg")]:
        for line in (snap.read(p) or "").splitlines():
            m = _GRUB_VAR.match(line)
            if m:
                grub_default.append(" ".join(cmdline_words(m.group(2))))
        if grub_default:
            sources[p] = " ".join(grub_default)
            grub_default = []
    for p in ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"):
        text = snap.read(p)
        if text is None:
            continue
        lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("linux")]
        if lines:
            # the first menu entry is the default on almost every generated grub.cfg
            sources[p] = " ".join(lines[0].split()[2:])
    if snap.read("/etc/kernel/cmdline") is not None:
        sources["/etc/kernel/cmdline"] = (snap.read("/etc/kernel/cmdline") or "").strip()
    for pat in BOOT_CONFIGS:
        if "loader/entries" not in pat:
            continue
        for p in snap.glob(pat):
            opts = [ln.strip()[len("options"):].strip() for ln in (snap.read(p) or "").splitlines()
                    if ln.strip().startswith("options")]
            if opts:
                sources[p] = " ".join(opts)
    return BootConfig(sources)


# -- per-device overrides --------------------------------------------------------------------
def parse_driverctl(snap: HostSnapshot) -> dict[str, tuple[str, str]]:
    """bdf -> (driver, file) from /etc/driverctl.d/pci-<bdf>."""
    out: dict[str, tuple[str, str]] = {}
    for p in snap.glob(f"{DRIVERCTL_DIR}/pci-*"):
        bdf = p.rsplit("/", 1)[1][len("pci-"):]
        drv = (snap.text(p) or "").split()
        if drv:
            out[bdf] = (drv[0], p)
    return out


@dataclass(frozen=True)
class UdevOverride:
    file: str
    driver: str
    kernel: str | None = None  # KERNEL=="<bdf>" (glob)
    vendor: str | None = None
    device: str | None = None


_UDEV_KEY = re.compile(r'([A-Z_]+)(?:\{([^}]*)\})?\s*(==|!=|=|\+=|:=)\s*"([^"]*)"')


def parse_udev_overrides(snap: HostSnapshot) -> list[UdevOverride]:
    res = snap.command("udev_driver_override")
    by_file: dict[str, list[str]] = {}
    for line in (res.output if res else "").splitlines():
        path, sep, text = line.partition(":")
        if sep and path.endswith(".rules"):
            by_file.setdefault(path, []).append(text)
    # udev precedence: a basename in an earlier directory hides the same name in later ones
    chosen: dict[str, str] = {}
    for d in UDEV_DIRS:
        for path in sorted(by_file):
            if path.rsplit("/", 1)[0] == d:
                chosen.setdefault(path.rsplit("/", 1)[1], path)
    out: list[UdevOverride] = []
    for base in sorted(chosen):
        p = chosen[base]
        for line in _logical_lines("\n".join(by_file[p])):
            keys = _UDEV_KEY.findall(line)
            drv = next((v for k, a, op, v in keys if k == "ATTR" and a == "driver_override"
                        and op in ("=", ":=")), None)
            if drv is None:
                continue
            kernel = vendor = device = None
            for k, a, op, v in keys:
                if op != "==":
                    continue
                if k in ("KERNEL", "KERNELS"):
                    kernel = v.lower()
                elif k in ("ATTR", "ATTRS") and a == "vendor":
                    vendor = v.lower().removeprefix("0x")
                elif k in ("ATTR", "ATTRS") and a == "device":
                    device = v.lower().removeprefix("0x")
            out.append(UdevOverride(p, drv.strip(), kernel, vendor, device))
    return out


@dataclass(frozen=True)
class InitramfsListing:
    image: str | None
    entries: tuple[str, ...]
    error: str | None = None

    def modules(self) -> set[str]:
        out = set()
        for e in self.entries:
            m = re.search(r"/([^/]+)\.ko(\.(xz|zst|gz))?$", e)
            if m:
                out.add(mod(m.group(1)))
        return out

    def config_files(self) -> set[str]:
        return {"/" + e.lstrip("./").lstrip("/") for e in self.entries
                if "modprobe.d/" in e or "modules-load.d/" in e or e.endswith("conf/modules")}


def parse_initramfs(snap: HostSnapshot) -> InitramfsListing:
    res = snap.command("initramfs_list")
    if res is None:
        return InitramfsListing(None, (), "the initramfs listing was not collected")
    lines = res.output.splitlines()
    if "KGC-NO-INITRAMFS" in res.output:
        return InitramfsListing(None, (), "no initramfs image for the running kernel in /boot")
    if "KGC-NO-LSINITRAMFS" in res.output:
        return InitramfsListing(None, (), "neither lsinitramfs nor lsinitrd is installed")
    if "KGC-NO-TMPDIR" in res.output:
        # lsinitramfs unpacks into a temporary directory: on a read-only root (a pod's
        # read-only host mount) it cannot, and the listing is unknown, not empty
        return InitramfsListing(None, (), "no writable temporary directory to list the "
                                "initramfs in (TMPDIR or /tmp is read-only)")
    marker = next((ln.strip() for ln in lines if ln.startswith("KGC-")), None)
    if marker is not None:  # a failure the command named: never an entry of the listing
        return InitramfsListing(None, (), f"the initramfs listing failed: {marker}")
    image = next((ln[len("# image "):] for ln in lines if ln.startswith("# image ")), None)
    entries = tuple(ln.strip() for ln in lines if ln.strip() and not ln.startswith("# image "))
    if res.rc != 0 and not entries:
        return InitramfsListing(image, (), f"listing the initramfs failed (exit {res.rc})")
    return InitramfsListing(image, entries)


# -- early boot: does vfio-pci still win inside the initramfs? ------------------------------
@dataclass(frozen=True)
class EarlyBoot:
    """Whether the vfio binding of a device holds in early boot, from the initramfs listing.

    ``state``: ``safe`` (no host driver for the device in the initramfs, or vfio_pci and its
    configuration are there too), ``fails`` (a host driver is there and vfio_pci is not: the
    host driver binds first), ``stale`` (vfio_pci is there but the configuration that makes
    it win -- softdep/blacklist/ids in /etc -- is not: the initramfs is older than the
    configuration), ``unknown`` (no listing). One function, so persistence.initramfs,
    persistence.load-order and vfio.competing-driver tell the same story."""

    state: str
    why: str
    host_drivers: tuple[str, ...] = ()
    missing_config: tuple[str, ...] = ()


def guard_files(modprobe: ModprobeConfig, module: str) -> set[str]:
    """The modprobe.d files whose lines make vfio-pci win over ``module``."""
    m = mod(module)
    out = {f for f, pres in modprobe.softdeps_pre.get(m, ())[:1] if "vfio_pci" in map(mod, pres)}
    if m in modprobe.blacklist:
        out.add(modprobe.blacklist[m])
    if m in modprobe.install_disabled:
        out.add(modprobe.install_disabled[m])
    return out


def early_boot(listing: InitramfsListing, modprobe: ModprobeConfig,
               host_drivers: Iterable[str]) -> EarlyBoot:
    if listing.error is not None:
        return EarlyBoot("unknown", f"initramfs contents unknown: {listing.error}")
    image = f"the initramfs {listing.image}" if listing.image else "the initramfs"
    mods = listing.modules()
    present = tuple(sorted({mod(m) for m in host_drivers} & mods))
    if not present:
        return EarlyBoot("safe", f"{image} carries no host driver for it")
    if "vfio_pci" not in mods:
        return EarlyBoot(
            "fails",
            f"{image} carries host driver(s) {', '.join(present)} but not vfio_pci: "
            f"{present[0]} binds the device in early boot, before any vfio configuration on the "
            "root filesystem applies (see persistence.initramfs)",
            present,
        )
    need = {f for f, _r in modprobe.vfio_ids()}  # the file whose ids= takes effect
    for m in present:
        need |= guard_files(modprobe, m)
    have = listing.config_files()
    stale = tuple(sorted(f for f in need if f.startswith("/etc/") and f not in have))
    if stale:
        return EarlyBoot(
            "stale",
            f"{image} has vfio_pci beside {', '.join(present)} but not {', '.join(stale)}: the "
            "initramfs is older than the vfio configuration, so in early boot nothing makes "
            "vfio-pci win (see persistence.initramfs)",
            present,
            stale,
        )
    return EarlyBoot("safe", f"{image} carries vfio_pci and its configuration beside "
                     f"{', '.join(present)}", present)


INITRAMFS_FIX = (
    "Put vfio-pci into the initramfs with its configuration: add vfio, vfio_iommu_type1, "
    "vfio_pci to /etc/initramfs-tools/modules (dracut: add_drivers+=\" vfio vfio_iommu_type1 "
    "vfio_pci \" in /etc/dracut.conf.d/vfio.conf), then update-initramfs -u -k all "
    "(dracut -f)."
)


# -- remedies computed from the configuration that is there ----------------------------------
DEFAULT_MODPROBE_FILE = "/etc/modprobe.d/vfio.conf"
# boot loader files a tool generates from /etc/default/grub (or kernel-install)
GENERATED_BOOT = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg", "/boot/loader/entries/",
                  "/efi/loader/entries/", "/boot/efi/loader/entries/")
REGENERATE_BOOT = ("update-grub (RHEL: grub2-mkconfig -o /boot/grub2/grub.cfg; systemd-boot: "
                   "kernel-install)")
REBUILD_INITRAMFS = "update-initramfs -u -k all (dracut: dracut -f)"


def generated_boot(f: str) -> bool:
    return f.startswith(GENERATED_BOOT)


@dataclass(frozen=True)
class Edit:
    """One machine-applicable change to a configuration file: replace the line ``old`` (the
    logical line as it is in the file) by ``new``, or append ``new`` when ``old`` is None."""

    file: str
    new: str
    old: str | None = None

    def describe(self) -> str:
        if self.old is None:
            return f"add the line `{self.new}` to {self.file}"
        return f"in {self.file}, change `{self.old}` to `{self.new}`"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "old": self.old, "new": self.new}


def apply_edits(files: Mapping[str, str], steps: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The files after the ``edit`` steps of a verdict's ``fix`` (``run`` steps are not file
    changes and are left out). Pure; a replacement whose line is not there raises, so a fix
    that does not fit the config it was computed from cannot pass unnoticed."""
    out = dict(files)
    for st in steps:
        if "file" not in st:
            continue
        path, old, new = st["file"], st.get("old"), st["new"]
        text = out.get(path, "")
        if old is None:
            out[path] = text + ("" if not text or text.endswith("\n") else "\n") + new + "\n"
            continue
        lines = text.splitlines()
        idx = next((i for i, ln in enumerate(lines) if ln.strip() == old.strip()), None)
        if idx is None:
            raise ValueError(f"{path}: the line to change is not there: {old!r}")
        lines[idx] = new
        out[path] = "\n".join(lines) + "\n"
    return out


def _etc_modprobe_file(modprobe: ModprobeConfig) -> str:
    """Where new vfio lines go: the /etc file that already holds the vfio-pci options (or a
    softdep putting vfio-pci first), else /etc/modprobe.d/vfio.conf."""
    for f, c, m, ln in modprobe.lines:
        if f.startswith("/etc/") and ((c == "options" and m == "vfio_pci")
                                      or (c == "softdep" and "vfio_pci" in map(mod, ln.split()))):
            return f
    return DEFAULT_MODPROBE_FILE


def softdep_edit(modprobe: ModprobeConfig, module: str) -> Edit:
    """Make vfio-pci load before ``module``. modprobe honours only the first softdep line
    for a module (see :meth:`ModprobeConfig.pre_of`): when one exists, vfio-pci goes into
    that line's pre: list; appending a second line would be ignored. A line in a
    package-owned directory (/usr/lib, /lib) is not edited: the same line with vfio-pci goes
    into an /etc file whose name sorts first, so modprobe reads it first."""
    m = mod(module)
    first = modprobe.line_of("softdep", m)
    if first is None:
        return Edit(_etc_modprobe_file(modprobe), f"softdep {m} pre: vfio-pci")
    f, line = first
    words = line.split()
    if "pre:" in words:
        words.insert(words.index("pre:") + 1, "vfio-pci")
    else:
        words[2:2] = ["pre:", "vfio-pci"]
    new = " ".join(words)
    if f.startswith("/etc/"):
        return Edit(f, new, line)
    return Edit("/etc/modprobe.d/00-" + f.rsplit("/", 1)[1], new)


def _etc_after(modprobe: ModprobeConfig, path: str) -> str:
    """An /etc/modprobe.d file that modprobe reads after ``path`` (its basename sorts
    later) and that hides no other file: the one the vfio lines are in when it qualifies,
    else zz-<basename of path>."""
    base = path.rsplit("/", 1)[1]
    taken = {p.rsplit("/", 1)[1] for p in modprobe.files if not p.startswith("/etc/")}
    for cand in (_etc_modprobe_file(modprobe), f"/etc/modprobe.d/zz-{base}"):
        name = cand.rsplit("/", 1)[1]
        if name > base and name not in taken:
            return cand
    return f"/etc/modprobe.d/zz-{base}"


def ids_edit(modprobe: ModprobeConfig, ids: Iterable[str]) -> Edit | None:
    """Add ``ids`` to the ``options vfio-pci ids=`` that takes effect: the LAST one modprobe
    reads (:meth:`ModprobeConfig.vfio_ids`; adding to an earlier one changes nothing, the
    kernel keeps only the last assignment). In its line when that is in /etc (its last
    ``ids=`` extended); when it is in a package-owned file (/usr/lib, /lib), a new line with
    that line's ids and ``ids`` in an /etc file read after it; with no ids= anywhere, a new
    line. None when every id is in the effective ids= already."""
    want = list(dict.fromkeys(ids))
    listed = {str(r) for _f, r in modprobe.vfio_ids()}
    missing = [i for i in want if i not in listed]
    if not missing:
        return None
    eff = modprobe.vfio_ids_line()
    if eff is None:
        return Edit(_etc_modprobe_file(modprobe), f"options vfio-pci ids={','.join(missing)}")
    f, line = eff
    have = [x for x in modprobe.vfio_ids_assignments()[-1][1].split(",") if x]
    value = "ids=" + ",".join(have + missing)
    words = line.split()
    at = [j for j, w in enumerate(words) if j >= 2 and w.startswith("ids=")]
    # an edit names its line by its text (Edit.old): a line that stands twice in its file
    # would name the first, shadowed copy, so the fix is then a new line read after both
    twice = sum(1 for ff, _c, _m, ln in modprobe.lines if ff == f and ln.strip() == line.strip())
    if f.startswith("/etc/") and at and twice == 1:
        words[at[-1]] = value
        return Edit(f, " ".join(words), line)
    # a package file, a line whose ids= is quoted oddly, or one that stands twice: a later
    # line that sets it again
    return Edit(f if f.startswith("/etc/") else _etc_after(modprobe, f),
                f"options vfio-pci {value}")


@dataclass(frozen=True)
class BootBinding:
    """Everything that binds a device to vfio-pci at the next boot, as the node has it."""

    modprobe: ModprobeConfig = ModprobeConfig()
    boot: BootConfig = BootConfig()
    driverctl: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    udev: tuple[UdevOverride, ...] = ()
    proc_cmdline: str | None = None
    initramfs: InitramfsListing = InitramfsListing(None, (), "not collected")
    # the files a command line fix edits (CMDLINE_FILES): file -> text (None: not there)
    boot_files: Mapping[str, str | None] = field(default_factory=dict)


def parse_boot_binding(snap: HostSnapshot) -> BootBinding:
    return BootBinding(parse_modprobe(snap), parse_boot_config(snap), parse_driverctl(snap),
                       tuple(parse_udev_overrides(snap)), snap.text("/proc/cmdline"),
                       parse_initramfs(snap), {f: snap.read(f) for f in CMDLINE_FILES})


ALL_MECHANISMS = ("modprobe", "cmdline", "driverctl", "udev")


def modprobe_ids(b: BootBinding) -> tuple[tuple[str, IdRule], ...]:
    """The modprobe.d ``ids=`` rules that bind at the next boot: the effective assignment
    (:meth:`ModprobeConfig.vfio_ids`), and none as soon as a boot loader file's command
    line sets ``vfio-pci.ids=``: libkmod appends the command line's options after every
    modprobe.d line (``kmod_config_new()`` calls ``kmod_config_parse_kcmdline()`` last,
    kmod libkmod/libkmod-config.c) and the kernel keeps the last assignment. Conservative
    when the boot loader files disagree (one sets it, another does not, e.g. grub.cfg not
    regenerated, see persistence.cmdline): the modprobe.d rule then binds only if the next
    boot happens to use a file without it, so no binding is claimed from it."""
    return () if b.boot.ids_sources() else b.modprobe.vfio_ids()


LAST_WINS = "the kernel keeps only the last assignment"


def shadowed_ids(b: BootBinding) -> list[tuple[str, IdRule, str]]:
    """(file, rule, why) of every vfio-pci ids rule in the configuration that binds nothing
    at the next boot, the why naming what replaces it: a later modprobe.d ``ids=``
    (:meth:`ModprobeConfig.vfio_ids_shadowed`), the command line's ``vfio-pci.ids=``
    (:func:`modprobe_ids`), a later ``vfio-pci.ids=`` on the same command line."""
    out = [(f, r, f"{f} lists {r} in vfio-pci ids=, but {g} sets ids= again later and "
            f"{LAST_WINS}") for f, r, g in b.modprobe.vfio_ids_shadowed()]
    srcs = b.boot.ids_sources()
    if srcs:
        others = [f for f in b.boot.sources if f not in srcs]
        for f, r in b.modprobe.vfio_ids():
            why = (f"{f} lists {r} in vfio-pci ids=, but the kernel command line in "
                   f"{', '.join(srcs)} sets vfio-pci.ids=, which modprobe applies after every "
                   f"modprobe.d option, and {LAST_WINS}")
            if others:
                why += (f" (not set in {', '.join(others)}: the rule binds only if the next "
                        f"boot uses {'that' if len(others) == 1 else 'one of those'})")
            out.append((f, r, why))
    out += [(f, r, f"{f} lists {r} in vfio-pci.ids=, but its command line sets vfio-pci.ids= "
             f"again later and {LAST_WINS}") for f, r in b.boot.ids_shadowed()]
    return out


def shadowed_for(b: BootBinding, d: PciDevice) -> list[str]:
    """Why each shadowed ids rule that names ``d`` binds nothing (:func:`shadowed_ids`)."""
    return list(dict.fromkeys(
        why for _f, r, why in shadowed_ids(b)
        if r.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device)))


def ids_fix(b: BootBinding, ids: list[str],
            accepted: Iterable[str] = ALL_MECHANISMS) -> tuple[str, list[Edit], list[str]] | None:
    """How to add ``ids`` to the vfio-pci ids rule that takes effect at the next boot:
    (mechanism, edits, steps). The command line's ``vfio-pci.ids=`` when a boot loader
    file sets one (it replaces every modprobe.d ids=: :func:`modprobe_ids`), then the
    boot loader config regenerated; else the effective modprobe.d ``ids=``
    (:func:`ids_edit`). None when that mechanism is not accepted or nothing is missing."""
    acc = set(accepted)
    srcs = b.boot.ids_sources()
    if srcs:
        if "cmdline" not in acc or not ids:
            return None
        edits = cmdline_edits(b.boot_files, add=[f"vfio-pci.ids={','.join(ids)}"])
        if not edits:
            return "cmdline", [], [f"add {','.join(ids)} to vfio-pci.ids= in "
                                   f"{', '.join(srcs)}, then {REGENERATE_BOOT}"]
        regen = REGENERATE_BOOT if edits[0].file == GRUB_DEFAULT else REBUILD_ENTRIES
        return "cmdline", edits, ["regenerate the boot loader config: " + regen]
    if "modprobe" not in acc:
        return None
    e = ids_edit(b.modprobe, ids)
    return None if e is None else ("modprobe", [e], [])


def boot_mechanisms(b: BootBinding, d: PciDevice, allowed: Iterable[str],
                    accepted: Iterable[str] = ALL_MECHANISMS) -> list[tuple[str, str]]:
    """(mechanism, where) pairs that bind ``d`` to an allowed vfio driver at the next boot.
    An ids rule counts only when it takes effect (:func:`modprobe_ids`,
    :meth:`BootConfig.ids`); why a shadowed one does not: :func:`shadowed_for`."""
    acc = set(accepted)
    ok = {mod(a) for a in allowed}
    out: list[tuple[str, str]] = []
    if "modprobe" in acc:
        for f, rule in modprobe_ids(b):
            if rule.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
                out.append(("modprobe", f"{f}: options vfio-pci ids={rule}"))
    if "cmdline" in acc:
        for f, rule in b.boot.ids():
            if rule.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
                out.append(("cmdline", f"{f}: vfio-pci.ids={rule}"))
    if "driverctl" in acc and d.bdf in b.driverctl:
        drv, f = b.driverctl[d.bdf]
        if mod(drv) in ok:
            out.append(("driverctl", f"{f}: {drv}"))
    if "udev" in acc:
        for u in b.udev:
            if mod(u.driver) not in ok:
                continue
            if u.kernel is not None and not fnmatch.fnmatchcase(d.bdf, u.kernel):
                continue
            if u.vendor is not None and u.vendor != d.vendor:
                continue
            if u.device is not None and u.device != d.device:
                continue
            if u.kernel is None and u.vendor is None and u.device is None:
                continue
            out.append(("udev", f"{u.file}: ATTR{{driver_override}}=\"{u.driver}\""))
    return out


@dataclass(frozen=True)
class PendingBoot:
    """A device not on vfio-pci now whose binding the node has configured for the next boot.

    ``wrong``: what would still stop the configuration at boot (None: only the reboot is
    missing); ``edits`` and ``steps``: what to do about it before the reboot. Every check
    that fails because the device is not on vfio-pci tells this one story."""

    where: tuple[str, ...]
    wrong: str | None = None
    edits: tuple[Edit, ...] = ()
    steps: tuple[str, ...] = ()
    # when ``where`` is empty: the device's only binding is an ids rule that another one
    # replaces (why, per rule: :func:`shadowed_for`); ``edits`` add it to the one that counts
    shadowed: tuple[str, ...] = ()

    def story(self) -> str:
        if not self.where:
            s = "its vfio-pci ids= binding does not take effect: " + "; ".join(self.shadowed)
            return s + (f"; and {self.wrong}" if self.wrong else "")
        w = "; ".join(self.where)
        if self.wrong:
            return f"its binding is configured ({w}), but {self.wrong}"
        return f"its binding is configured ({w}), pending reboot"

    def fix(self) -> str:
        parts = [e.describe() for e in self.edits] + list(self.steps)
        if not parts:
            return ("Reboot the node: the binding is configured (" + "; ".join(self.where)
                    + ") and applies at the next boot.")
        return "; ".join(parts) + "; then reboot the node."

    def fix_steps(self) -> list[dict[str, Any]]:
        return ([e.to_dict() for e in self.edits] + [{"run": s} for s in self.steps]
                + [{"run": "reboot"}])


def pending_boot(b: BootBinding, d: PciDevice, host_drivers: Iterable[str],
                 allowed: Iterable[str],
                 accepted: Iterable[str] = ALL_MECHANISMS) -> PendingBoot | None:
    """The configured-but-not-applied story of ``d`` (None: nothing binds it at boot).

    A device whose only binding is a shadowed ids rule (:func:`shadowed_for`) gets the story
    of that rule, and the edit adding its id to the rule that takes effect (:func:`ids_fix`)
    with what else the binding needs at boot."""
    mech = boot_mechanisms(b, d, allowed, accepted)
    edits: list[Edit] = []
    steps: list[str] = []
    shadowed: tuple[str, ...] = ()
    if mech:
        where = tuple(dict.fromkeys(w for _k, w in mech))
        kinds = {k for k, _w in mech}
    else:
        shadowed = tuple(shadowed_for(b, d))
        fix = ids_fix(b, [d.ident], accepted) if shadowed and d.vendor and d.device else None
        if fix is None:
            return None
        where, kinds = (), {fix[0]}
        edits += fix[1]
        steps += fix[2]
        if fix[0] == "modprobe":
            steps.append("rebuild the initramfs: " + REBUILD_INITRAMFS)
    if kinds & {"driverctl", "udev"}:
        return PendingBoot(where)  # a per-device override is re-applied at boot whatever loads
    hosts = [mod(m) for m in dict.fromkeys(host_drivers)
             if not mod(m).startswith("vfio") and mod(m) != "pci_stub"]
    wrong: list[str] = []
    if kinds == {"cmdline"} and where:
        running = vfio_ids_in(cmdline_words(b.proc_cmdline or ""))
        if any(r.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device)
               for r in running):
            wrong.append(f"the running kernel was booted with it (/proc/cmdline has "
                         f"vfio-pci.ids for {d.vendor}:{d.device}), so a reboot alone changes "
                         "nothing")
        srcs = [f for f, r in b.boot.ids()
                if r.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device)]
        gen = [f for f in b.boot.sources if generated_boot(f)]
        if gen and not any(generated_boot(f) for f in srcs):
            steps.append(f"regenerate {', '.join(gen)} from {', '.join(srcs)}: "
                         + REGENERATE_BOOT)
    unguarded = [m for m in hosts if b.modprobe.vfio_first(m) is None]
    if unguarded:
        wrong.append(f"at boot nothing makes vfio-pci load before {', '.join(unguarded)} (no "
                     "softdep/blacklist), which can claim it first")
        edits += [softdep_edit(b.modprobe, m) for m in unguarded]
    eb = early_boot(b.initramfs, b.modprobe, hosts)
    if eb.state == "fails":
        wrong.append(eb.why.replace(" (see persistence.initramfs)", ""))
        steps.append(INITRAMFS_FIX)
    elif eb.state == "stale" or (unguarded and eb.state != "safe"):
        steps.append("rebuild the initramfs: " + REBUILD_INITRAMFS)
    return PendingBoot(where, "; ".join(wrong) or None, tuple(edits),
                       tuple(dict.fromkeys(steps)), shadowed)


# -- kernel command line edits: the boot loader line that is there ---------------------------
GRUB_DEFAULT = "/etc/default/grub"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
CMDLINE_FILES = (GRUB_DEFAULT, KERNEL_CMDLINE)


def _param_key(word: str) -> str:
    return word.partition("=")[0].replace("-", "_")


def merged_adds(words: Iterable[str], add: Iterable[str], remove: Iterable[str]) -> list[str]:
    """``add`` keeping the other comma options its key has in ``words``
    (intel_iommu=sm_on + intel_iommu=on -> intel_iommu=on,sm_on); ``off`` is dropped."""
    ws, rm = list(words), list(remove)
    out = []
    for a in add:
        k, _, v = a.partition("=")
        mine = (*v.split(","), "off")  # the values it has already (never twice), and off
        others = [x for w in ws if _param_key(w) == _param_key(a) and w not in rm
                  for x in w.partition("=")[2].split(",") if x and x not in mine]
        out.append(f"{k}={','.join([v, *dict.fromkeys(others)])}" if v else a)
    return out


def _edit_words(words: list[str], add: Iterable[str], remove: Iterable[str]) -> list[str]:
    """``words`` without the ``remove`` parameters (``key=value`` exact, or a bare ``key``
    meaning every value of it) and with ``add`` (replacing any other value of the same key:
    the kernel takes the last one, a duplicate only hides what is meant)."""
    rm = list(remove)
    adds = merged_adds(words, add, rm)
    add_keys = {_param_key(a) for a in adds}
    out = [w for w in words if w not in rm and _param_key(w) not in
           ({_param_key(r) for r in rm if "=" not in r} | add_keys)]
    return out + adds


def cmdline_edits(files: Mapping[str, str | None], add: Iterable[str] = (),
                  remove: Iterable[str] = ()) -> list[Edit]:
    """Edits that put ``add`` on and take ``remove`` off the command line the next boot
    uses, in the file that holds it: GRUB_CMDLINE_LINUX (and GRUB_CMDLINE_LINUX_DEFAULT,
    which also reaches the default entry) in /etc/default/grub, else /etc/kernel/cmdline.
    The value is written double-quoted as grub's shell-sourced file expects. Empty: none of
    those files is in the evidence."""
    adds, rms = list(add), list(remove)
    grub = files.get(GRUB_DEFAULT)
    if grub is not None:
        every = [w for ln in grub.splitlines() if (g := _GRUB_VAR.match(ln))
                 for w in cmdline_words(" ".join(cmdline_words(g.group(2))))]
        adds = merged_adds(every, adds, rms)
        edits: list[Edit] = []
        seen: set[str] = set()
        for line in grub.splitlines():
            m = _GRUB_VAR.match(line)
            if not m or m.group(1) in seen:
                continue
            seen.add(m.group(1))
            # the shell value (quotes removed), then its kernel words
            words = cmdline_words(" ".join(cmdline_words(m.group(2))))
            new = _edit_words(words, adds if m.group(1) == "GRUB_CMDLINE_LINUX" else (), rms)
            if m.group(1) == "GRUB_CMDLINE_LINUX_DEFAULT":
                new = [w for w in new if _param_key(w) not in {_param_key(a) for a in adds}]
            if new != words:
                edits.append(Edit(GRUB_DEFAULT, f'{m.group(1)}="{" ".join(new)}"', line))
        if "GRUB_CMDLINE_LINUX" not in seen and adds:
            edits.append(Edit(GRUB_DEFAULT, f'GRUB_CMDLINE_LINUX="{" ".join(adds)}"'))
        return edits
    text = files.get(KERNEL_CMDLINE)
    if text is not None:
        words = cmdline_words(text.strip())
        new = _edit_words(words, adds, rms)
        if new == words:
            return []
        old = text.strip().splitlines()[0] if text.strip() else None
        return [Edit(KERNEL_CMDLINE, " ".join(new), old)]
    return []


REBUILD_ENTRIES = "kernel-install (or your boot loader's tool) to rebuild the boot entries"


def cmdline_fix_steps(edits: list[Edit]) -> list[dict[str, Any]]:
    """The edits, then what makes them the next boot's command line, then the reboot."""
    if not edits:
        return []
    regen = REGENERATE_BOOT if edits[0].file == GRUB_DEFAULT else REBUILD_ENTRIES
    return [e.to_dict() for e in edits] + [{"run": regen}, {"run": "reboot"}]
