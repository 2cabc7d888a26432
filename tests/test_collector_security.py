"""Security of the collector and its inputs (issue 9, "Security"):

- no operator- or profile-supplied string reaches the node's shell unquoted: the real
  generated script runs with ``sh`` against a temp tree under hostile ``KGC_ROOT`` values and
  hostile profile paths, and a canary command never runs;
- registry credentials in containerd's config never reach evidence (``redact_containerd_config``);
- a profile cannot make the collector read outside the places each field belongs
  (``/etc/shadow`` as a Kata config path is a one-line profile error naming the field).
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kgc.core.engine import host_query
from kgc.core.hostfs import HostQuery, build_script, new_boundary, parse_output
from kgc.core.profile import Profile, ProfileError, RuntimeProfile, load_profile
from kgc.core.registry import load_layers
from kgc.evidence.containerd import redact_containerd_config
from kgc.layers.runtime import parse as runtime_parse
from kgc.layers.runtime.collect import query_for

PROFILE = load_profile()
LAYERS = load_layers()

# Payloads that would run `touch CANARY` if pasted into a shell word, a sed expression
# (the `e` flag), an awk program or a command substitution.
PAYLOADS = [
    "$(touch {c})",
    "`touch {c}`",
    "';touch {c};'",
    '";touch {c};"',
    "|e touch {c}|",
    "|;e touch {c}\n|",
    "x|e touch {c}|g",
    "\ntouch {c}\n",
    "${{IFS}}$(touch {c})",
    "&& touch {c}",
    "|| touch {c} #",
    "\\'; touch {c}; echo \\'",
    "*/../$(touch {c})",
    "]$(touch {c})[",
    "%s$(touch {c})",
]
noise = st.text(st.characters(codec="utf-8", exclude_characters="\x00/",
                              exclude_categories=("Cs",)), max_size=6)


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _tree(base: Path) -> None:
    for rel, text in {
        "etc/udev/rules.d/70-vfio.rules":
            'ACTION=="add", KERNEL=="0000:01:00.0", ATTR{driver_override}="vfio-pci"\n',
        "etc/containerd/config.toml": "version = 2\n",
        "proc/cmdline": "root=/dev/vda\n",
        "proc/sys/kernel/osrelease": "6.1.0-test\n",
    }.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payload=st.sampled_from(PAYLOADS), pre=noise, post=noise)
def test_hostile_root_runs_no_command(tmp_path_factory, payload: str, pre: str,
                                      post: str) -> None:
    """The full host query (every layer's files, globs, stats and commands) with a KGC_ROOT
    whose last path component is hostile: the canary file is never created."""
    base = tmp_path_factory.mktemp("inj")
    canary = base / "CANARY"
    name = (pre + payload.format(c=canary) + post).replace("/", "_").replace("\x00", "")
    if name in ("", ".", ".."):
        name = "x" + name
    root = base / name[:200]
    root.mkdir(parents=True, exist_ok=True)
    _tree(root)
    script = build_script(host_query(LAYERS, PROFILE), b := new_boundary())
    res = _run(script, {"KGC_ROOT": str(root), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert not canary.exists(), (name, res.stderr[-2000:])
    snap = parse_output(res.stdout, b)
    assert snap.complete, res.stderr[-2000:]
    # and the tree was really read through the hostile root
    assert snap.read("/proc/cmdline") == "root=/dev/vda\n"
    udev = snap.command("udev_driver_override")
    assert udev is not None and "/etc/udev/rules.d/70-vfio.rules:" in udev.output


def test_sed_e_flag_through_the_root_is_dead(tmp_path: Path) -> None:
    """The exact attack from the issue: with a root named `base|touch CANARY|e<newline>#` the
    udev command's `sed "s|^$R||"` became `s|^.../base|touch CANARY|e` (the rest a comment),
    whose `e` flag ran the rewritten line -- `touch CANARY...` -- as a shell command."""
    from kgc.evidence.vfio_config import CONFIG_QUERY

    root = tmp_path / "base|touch CANARY|e\n#"
    root.mkdir()
    _tree(root)
    work = tmp_path / "cwd"
    work.mkdir()
    script = build_script(CONFIG_QUERY, b := new_boundary())
    res = subprocess.run(["sh", "-c", script], env={"KGC_ROOT": str(root), "PATH": "/usr/bin:/bin"},
                         cwd=work, capture_output=True, text=True, timeout=60, check=False)
    assert not (work / "CANARY").exists(), res.stderr
    udev = parse_output(res.stdout, b).command("udev_driver_override")
    assert udev is not None
    assert udev.output.startswith("/etc/udev/rules.d/70-vfio.rules:"), udev.output


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payload=st.sampled_from(PAYLOADS), pre=noise,
       field=st.sampled_from(["containerd_config", "nri_socket", "containerd_bin",
                              "kata_config_paths", "shim_dirs"]))
def test_hostile_profile_strings_are_refused_or_inert(tmp_path_factory, payload: str, pre: str,
                                                      field: str) -> None:
    """A hostile string in any runtime path field is either refused by the profile schema
    (one line naming the field) or, if the schema took it, runs nothing on the node."""
    base = tmp_path_factory.mktemp("prof")
    canary = base / "CANARY"
    value = "/etc/containerd/" + pre + payload.format(c=canary)
    raw = {"runtime": {field: [value] if field in ("kata_config_paths", "shim_dirs") else value}}
    try:
        prof = Profile.model_validate({"name": "hostile", **raw})
    except ValidationError as exc:
        assert f"runtime.{field}" in _one_line(exc) or field in str(exc)
        return
    root = base / "root"
    root.mkdir()
    _tree(root)
    script = build_script(query_for(prof.runtime), new_boundary())
    _run(script, {"KGC_ROOT": "", "PATH": "/usr/bin:/bin"})
    _run(script, {"KGC_ROOT": str(root), "PATH": "/usr/bin:/bin"})
    assert not canary.exists(), value


def _one_line(exc: ValidationError) -> str:
    return " ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())


def test_query_paths_refuse_shell_syntax() -> None:
    for bad in ("/etc/a b", "/etc/a\tb", "/etc/$(x)", "/etc/`x`", "/etc/a;b", "/etc/a'b",
                '/etc/a"b', "/etc/a\nb", "/etc/a\\b", "/etc/{a,b}", "/etc/a|b", "/etc/~x",
                "/etc/a#b", "/etc/a\x01"):
        with pytest.raises(ValueError):
            build_script(HostQuery(files=(bad,)), new_boundary())


# -- registry credentials ---------------------------------------------------------------
V2_WITH_SECRETS = '''version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = ""
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.example"]
  [plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".auth]
    username = "SECRET-USER-1"
    password = "SECRET-PASS-1"
    auth = "U0VDUkVULUFVVEg="
    identitytoken = """SECRET-TOKEN-1
continued"""
  [plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".tls]
    insecure_skip_verify = false
  [plugins."io.containerd.grpc.v1.cri".registry.auths."https://quay.io"]
    auth = "SECRET-AUTHS-1"
  [plugins."io.containerd.grpc.v1.cri".registry.headers]
    Authorization = ["Bearer SECRET-HEADER-1",
                     "Basic SECRET-HEADER-2"]
    X-Keep = ["SECRET-HEADER-3"]
[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]
password = 'SECRET-PASS-2'
[plugins."io.containerd.nri.v1.nri"]
  disable = false
'''
V3_DUMP_WITH_SECRETS = """version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = ''
      [plugins.'io.containerd.cri.v1.images'.registry.configs]
        [plugins.'io.containerd.cri.v1.images'.registry.configs.'gcr.io']
          [plugins.'io.containerd.cri.v1.images'.registry.configs.'gcr.io'.auth]
            username = 'SECRET-USER-3'
            password = 'SECRET-PASS-3'
            auth = ''
            identitytoken = ''
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
"""
DOTTED = '''version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  configs."gcr.io".auth.password = "SECRET-PASS-4"
  configs."gcr.io".auth = { username = "SECRET-USER-4", password = "SECRET-PASS-5" }
  mirrors."docker.io".endpoint = ["https://keep.example"]
'''
INLINE = '''version = 2
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io"]
  auth = { username = "SECRET-USER-6", password = "SECRET-PASS-6" }
  tls = { insecure_skip_verify = true }
'''
BROKEN = '''version = 2
[plugins."io.containerd.grpc.v1.cri".registry.configs."gcr.io".auth]
  password = "SECRET-PASS-7"
  this is not toml
  [plugins."io.containerd.grpc.v1.cri".registry.headers]
  Authorization = ["SECRET-HEADER-8"]
identitytoken = "SECRET-TOKEN-9"
'''


@pytest.mark.parametrize("text", [V2_WITH_SECRETS, V3_DUMP_WITH_SECRETS, DOTTED, INLINE, BROKEN])
def test_redaction_drops_every_credential(text: str) -> None:
    out = redact_containerd_config(text)
    assert "SECRET" not in out, out


def test_redaction_keeps_everything_else() -> None:
    out = redact_containerd_config(V2_WITH_SECRETS)
    data = tomllib.loads(out)
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["containerd"]["runtimes"]["kata"]["runtime_type"] == "io.containerd.kata.v2"
    assert cri["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror.example"]
    assert cri["registry"]["configs"]["gcr.io"]["tls"] == {"insecure_skip_verify": False}
    assert "auth" not in cri["registry"]["configs"]["gcr.io"]
    assert "auths" not in cri["registry"] and "headers" not in cri["registry"]
    assert data["plugins"]["io.containerd.nri.v1.nri"] == {"disable": False}
    dotted = tomllib.loads(redact_containerd_config(DOTTED))
    reg = dotted["plugins"]["io.containerd.grpc.v1.cri"]["registry"]
    assert reg["mirrors"]["docker.io"]["endpoint"] == ["https://keep.example"]
    # a file without credentials comes back byte for byte
    clean = V3_DUMP_WITH_SECRETS.split("  [plugins.'io.containerd.cri")[0]
    assert redact_containerd_config(clean) == clean


def test_runtime_evidence_carries_no_registry_credentials(tmp_path: Path) -> None:
    from kgc.core.hostfs import CommandResult, HostSnapshot

    snap = HostSnapshot(
        files={"/etc/containerd/config.toml": V2_WITH_SECRETS,
               "/etc/containerd/conf.d/10-auth.toml": DOTTED},
        commands={"containerd_config_dump": CommandResult(0, V3_DUMP_WITH_SECRETS),
                  "containerd_version": CommandResult(0, "containerd x 2.1.9")})
    ev = runtime_parse(snap, PROFILE)
    assert "SECRET" not in repr(ev)
    # what the checks judge is unchanged: the handler and NRI are still found
    assert ev.main.data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]


# -- profile paths ----------------------------------------------------------------------
BAD_PATHS = [
    ("kata_config_paths", ["/etc/shadow"]),
    ("kata_config_paths", ["/etc/kata-containers/../shadow"]),
    ("kata_config_paths", ["etc/kata-containers/configuration.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/$HOME.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/a b.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/a\tb.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/a'b.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/a\x07.toml"]),
    ("kata_config_paths", ["/etc/kata-containers/*.toml"]),
    ("containerd_config", "/etc/shadow"),
    ("containerd_config", "/root/.ssh/id_rsa"),
    ("containerd_config", "/etc/containerd/../shadow"),
    ("containerd_config", "/etc/containerd/config.toml\n"),
    ("nri_socket", "/etc/shadow"),
    ("nri_socket", "relative/nri.sock"),
    ("shim_dirs", ["/home/user/bin"]),
    ("shim_dirs", ["/usr/bin/../../etc"]),
    ("containerd_bin", "/bin/sh"),
    ("containerd_bin", "containerd; reboot"),
    ("containerd_bin", "/usr/bin/containerd "),
    ("containerd_version", "two"),
]


@pytest.mark.parametrize(("field", "value"), BAD_PATHS)
def test_profile_paths_outside_their_place_are_a_one_line_error(tmp_path: Path, field: str,
                                                                value: object) -> None:
    import yaml

    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "runtime": {field: value}}))
    with pytest.raises(ProfileError) as exc:
        load_profile(p)
    lines = str(exc.value).splitlines()
    named = [ln for ln in lines if f"runtime.{field}" in ln]
    assert len(named) == 1, str(exc.value)


GOOD_PATHS = [
    ("containerd_config", "/etc/containerd/config.toml"),
    ("containerd_config", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"),
    ("kata_config_paths", ["/opt/kata/share/defaults/kata-containers/runtimes/qemu-nvidia-gpu/"
                           "configuration-qemu-nvidia-gpu.toml"]),
    ("kata_config_paths", ["/usr/share/defaults/kata-containers/configuration.toml"]),
    ("nri_socket", "/var/run/nri/nri.sock"),
    ("nri_socket", "/run/nri/nri.sock"),
    ("shim_dirs", ["/usr/local/bin", "/opt/kata/bin"]),
    ("containerd_bin", "containerd"),
    ("containerd_bin", "/usr/local/bin/containerd"),
    ("containerd_version", "2.1"),
    ("containerd_version", "1.7.24"),
]


@pytest.mark.parametrize(("field", "value"), GOOD_PATHS)
def test_profile_paths_in_their_place_load(field: str, value: object) -> None:
    rp = RuntimeProfile.model_validate({field: value})
    assert getattr(rp, field) == (tuple(value) if isinstance(value, list) else value)


def test_builtin_and_lab_profiles_still_load() -> None:
    from kgc.core.profile import profiles_dir

    for p in sorted(profiles_dir().glob("*.yaml")):
        load_profile(p)
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "nri"
    for p in sorted(fix.glob("*.profile.yaml")):
        load_profile(p)


def test_no_profile_file_is_read_outside_the_allow_list() -> None:
    q = query_for(RuntimeProfile())
    for f in q.files:
        assert f.startswith(("/etc/containerd/", "/etc/kata-containers/", "/opt/kata/",
                             "/usr/share/defaults/kata-containers/")), f
    assert os.sep == "/"


toml_keys = st.sampled_from(["plugins", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images",
                             "registry", "configs", "gcr.io", "auth", "auths", "headers",
                             "mirrors", "endpoint", "tls", "password", "username", "x y",
                             "config_path", "host", "header", "kata"])
toml_leaf = st.one_of(st.booleans(), st.integers(-9, 9),
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
                      st.just("SECRET"))
toml_docs = st.recursive(toml_leaf, lambda k: st.one_of(st.lists(k, max_size=3),
                                                        st.dictionaries(toml_keys, k, max_size=4)),
                         max_leaves=25).filter(lambda d: isinstance(d, dict))


@given(doc=toml_docs, style=st.sampled_from(["tables", "inline"]))
@settings(max_examples=300, deadline=None)
def test_redaction_of_any_config_keeps_exactly_the_non_secret_data(doc, style) -> None:  # type: ignore[no-untyped-def]
    from kgc.evidence.containerd import _sensitive, dump_toml, strip_credentials

    text = dump_toml(doc) if style == "tables" else "".join(
        f"{_q(k)} = {_inline(v)}\n" for k, v in doc.items())
    assert tomllib.loads(text) == doc
    out = redact_containerd_config(text)
    assert tomllib.loads(out) == strip_credentials(doc)

    def secrets_left(d, path=()):  # type: ignore[no-untyped-def]
        if isinstance(d, dict):
            for k, v in d.items():
                assert not _sensitive((*path, k)), (path, k)
                secrets_left(v, (*path, k))

    secrets_left(tomllib.loads(out))


def _q(k: str) -> str:
    import json

    return json.dumps(k, ensure_ascii=False)


def _inline(v) -> str:  # type: ignore[no-untyped-def]
    from kgc.evidence.containerd import _toml_value

    return _toml_value(v)
