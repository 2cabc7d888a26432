"""Layer ``gpu`` — confidential GPUs (pure evaluators, per pod): ``gpu.cc-tee``,
``gpu.cc-mode``, ``gpu.cc-ready``, ``gpu.cc-attestation``.

An H100/H200 in CC mode inside a SEV-SNP or TDX Kata microVM (RuntimeClasses
``kata-qemu-nvidia-gpu-snp`` / ``-tdx``), judged from what the in-guest collector
(``kgc-guest/4``, :mod:`kgc.guest`) recorded: the TEE the guest shows, ``nvidia-smi
conf-compute -f`` / ``-grs``, and the fetch of the profile's attestation resource from the
guest's confidential data hub. The evidence Kata's own CI reads (kata-containers
``tests/integration/kubernetes/k8s-confidential-attestation.bats``, ``confidential_common.sh``:
SNP by ``dmesg | grep "Memory Encryption Features active:.*SEV-SNP"``, TDX by the CPU's
``TDX_GUEST`` flag; NVIDIA cloud-native-docs ``gpu-operator/confidential-containers.rst``:
"CC status: ON", "Confidential Compute GPUs Ready state: ready").

Every check skips, naming ``cluster.gpu.cc``, when the profile does not ask for CC. A command
the guest lacks (no nvidia-smi, a driver without ``conf-compute``, neither curl nor wget) is
a skip naming it, never a pass; output that does not parse is an ``error`` naming the pod and
the output. Registered on :data:`kgc.layers.gpu.checks.CHECKS` when imported (by
``kgc.layers.gpu``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kgc.core.model import Outcome, Severity, errored, failed, passed, skipped
from kgc.evidence.guest import (
    GuestCc,
    GuestEvidence,
    cc_attest_result,
    cc_mode_state,
    cc_ready_state,
)
from kgc.layers.gpu.checks import PodSubject, _pod_ev, _ran, _scoped, settings
from kgc.layers.gpu.evidence import GpuPodEvidence
from kgc.layers.gpu.profile import GpuCcProfile

TEE_NAMES = {"snp": "AMD SEV-SNP", "tdx": "Intel TDX"}
# the names kata-deploy gives its confidential NVIDIA classes, for remediation text only: the
# run's class is decided in one place, platform.kata.runtime_class
KATA_DEPLOY_CLASSES = {"snp": "kata-qemu-nvidia-gpu-snp", "tdx": "kata-qemu-nvidia-gpu-tdx"}
CC_MODE_FIX = ("Switch the GPU to CC mode on the host before the pod starts: with the GPU "
               "Operator label the node nvidia.com/cc.mode=on (its CC manager sets the mode and "
               "resets the GPU), or run NVIDIA's gpu-admin-tools "
               "(nvidia_gpu_tools.py --set-cc-mode=on --reset-after-cc-mode-switch).")
READY_FIX = ("The GPU stays not-ready until someone sets its ready state after attestation: "
             "Kata's confidential NVIDIA configs make NVRC do it with the kernel parameter "
             "nvrc.smi.srs=1 -- add it to kernel_params in the Kata configuration of the "
             "confidential RuntimeClass (configuration-qemu-nvidia-gpu-snp.toml / -tdx.toml, "
             "kata src/runtime/Makefile), or run nvidia-smi conf-compute -srs 1 in the guest "
             "once the GPU is attested.")


def _cc(subj: PodSubject, profile: Any) -> (
        tuple[GpuCcProfile, GpuPodEvidence, GuestEvidence, GuestCc] | Outcome):
    """The CC profile, the pod, its guest and its CC records, or the skip saying why not."""
    cc = settings(profile).cc
    if cc is None and subj.pod is None:
        return skipped("cluster.gpu.cc is not set: the profile does not ask for confidential "
                       f"GPUs (and no GPU pod ran: {'; '.join(subj.run.plan_notes) or 'none'})")
    if cc is None:
        return skipped("cluster.gpu.cc is not set: the profile does not ask for confidential "
                       "GPUs", **_pod_ev(subj.pod) if subj.pod is not None else {})
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    if g.cc is None:
        return skipped(f"{pod.ref}: its collector ({g.collector or 'kgc-guest/3 or older'}) "
                       "recorded no confidential-computing evidence (cc_tee, cc_mode, cc_ready: "
                       "kgc-guest/4 and later)", **_pod_ev(pod))
    return cc, pod, g, g.cc


def _first(text: str | None) -> str:
    for ln in (text or "").splitlines():
        if ln.strip():
            return ln.strip()[:200]
    return ""


# =========================================================================== checks
@_scoped(
    "pod",
    "gpu.cc-tee",
    title="The GPU pod's guest is the profile's TEE (SEV-SNP or TDX)",
    remediation="Run the pod with the confidential RuntimeClass (kata-qemu-nvidia-gpu-snp or "
    "-tdx) on a node whose host enables that TEE.",
    severity=Severity.BLOCKER,
)
def cc_tee(subj: PodSubject, profile: Any) -> Outcome:
    got = _cc(subj, profile)
    if isinstance(got, Outcome):
        return got
    cc, pod, _g, c = got
    ev = {**_pod_ev(pod), "tee_devices": list(c.devices), "kernel_lines": list(c.kernel_lines),
          "tdx_cpu_flag": c.tdx_flag, "kernel_log": c.log}
    if c.log is None:
        return errored(f"{pod.ref}: the cc_tee record does not parse: "
                       f"{(c.tee_output or '')[:200]!r}", **ev)
    want, other = cc.tee, "tdx" if cc.tee == "snp" else "snp"
    seen = [t for t, on in (("snp", c.snp), ("tdx", c.tdx)) if on]
    shown = "; ".join([*c.devices, *c.kernel_lines, *(["cpu flag tdx_guest"] if c.tdx_flag
                                                       else [])]) or "nothing"
    if len(seen) == 2:
        return errored(f"{pod.ref}: the guest shows both SEV-SNP and TDX evidence ({shown}); "
                       "cannot tell its TEE", **ev)
    if seen == [want]:
        return passed(f"{pod.ref} runs in an {TEE_NAMES[want]} guest ({shown})",
                      expected=TEE_NAMES[want], found=shown, **ev)
    if seen == [other]:
        return failed(
            f"{pod.ref} runs in an {TEE_NAMES[other]} guest, the profile asks for "
            f"{TEE_NAMES[want]} ({shown})",
            f"Set platform.kata.runtime_class to an {TEE_NAMES[want]} class (kata-deploy's: "
            f"{KATA_DEPLOY_CLASSES[want]}) on {TEE_NAMES[want]} nodes, or set "
            f"cluster.gpu.cc.tee to {other}.",
            expected=TEE_NAMES[want], found=f"{TEE_NAMES[other]}: {shown}", **ev)
    if c.log == "none":
        return errored(f"{pod.ref}: no TEE device in the guest (seen: {shown}) and its "
                       "kernel log was not readable (no dmesg, no /dev/kmsg): cannot tell its "
                       "TEE", **ev)
    return failed(
        f"{pod.ref}'s guest is not a confidential VM: no {TEE_NAMES[want]} evidence (no "
        f"{'/dev/sev-guest' if want == 'snp' else '/dev/tdx_guest, no tdx_guest cpu flag'}, "
        f"no 'Memory Encryption Features active' kernel line; seen: {shown})",
        f"Set platform.kata.runtime_class to an {TEE_NAMES[want]} class (kata-deploy's: "
        f"{KATA_DEPLOY_CLASSES[want]}; now {pod.runtime_class}) on a node whose host enables "
        f"{TEE_NAMES[want]}; check the Kata configuration's "
        "confidential_guest = true.",
        expected=TEE_NAMES[want], found=shown, **ev)


def _smi_state(pod: Any, flag: str, output: str | None, rc: int | None,
               parse: Callable[[str], str | None], what: str, line: str,
               ev: dict[str, Any]) -> str | Outcome:
    """The state one ``nvidia-smi conf-compute <flag>`` output gives, or the skip/error that
    says why it gives none: not recorded, no nvidia-smi (127), a driver without the
    subcommand (a non-zero exit and nothing parsed), or output without its ``line``."""
    if output is None and rc is None:
        return skipped(f"{pod.ref}: nvidia-smi conf-compute {flag} was not recorded", **ev)
    if rc == 127:
        return skipped(f"{pod.ref}: nvidia-smi is not in the guest image, so {what} cannot "
                       "be read (see gpu.smi-count)", **ev)
    out = output or ""  # an empty output is recorded as None (without_blanks)
    state = parse(out)
    if state is None and rc not in (0, None):
        return skipped(f"{pod.ref}: nvidia-smi conf-compute {flag} is not supported here (exit "
                       f"{rc}: {_first(out)!r}; a driver without CC support?)", **ev)
    if state is None:
        return errored(f"{pod.ref}: nvidia-smi conf-compute {flag} printed no {line} line: "
                       f"{out[:200]!r}", **ev)
    return state


@_scoped(
    "pod",
    "gpu.cc-mode",
    title="The GPU is in confidential-computing mode (nvidia-smi conf-compute -f: CC status ON)",
    remediation=CC_MODE_FIX,
    severity=Severity.BLOCKER,
)
def cc_mode(subj: PodSubject, profile: Any) -> Outcome:
    got = _cc(subj, profile)
    if isinstance(got, Outcome):
        return got
    _cfg, pod, _g, c = got
    ev = {**_pod_ev(pod), "conf_compute_f": c.mode_output, "rc": c.mode_rc}
    state = _smi_state(pod, "-f", c.mode_output, c.mode_rc, cc_mode_state, "its CC mode",
                       "'CC status:'", ev)
    if isinstance(state, Outcome):
        return state
    if state == "ON":
        return passed(f"{pod.ref}: the GPU's CC status is ON", expected="CC status: ON",
                      found=f"CC status: {state}", **ev)
    if state in ("OFF", "DEVTOOLS"):
        why = ("CC mode is OFF: the GPU is not confidential" if state == "OFF" else
               "the GPU is in CC DevTools mode (debugging, not confidential)")
        return failed(f"{pod.ref}: {why}", CC_MODE_FIX, expected="CC status: ON",
                      found=f"CC status: {state}", **ev)
    return errored(f"{pod.ref}: unknown CC status {state!r} from nvidia-smi conf-compute -f",
                   **ev)


@_scoped(
    "pod",
    "gpu.cc-ready",
    title="The confidential GPU is ready (nvidia-smi conf-compute -grs: ready)",
    remediation=READY_FIX,
    severity=Severity.BLOCKER,
)
def cc_ready(subj: PodSubject, profile: Any) -> Outcome:
    got = _cc(subj, profile)
    if isinstance(got, Outcome):
        return got
    _cfg, pod, _g, c = got
    ev = {**_pod_ev(pod), "conf_compute_grs": c.ready_output, "rc": c.ready_rc}
    state = _smi_state(pod, "-grs", c.ready_output, c.ready_rc, cc_ready_state,
                       "the GPUs' ready state", "'Confidential Compute GPUs Ready state:'", ev)
    if isinstance(state, Outcome):
        return state
    if state == "ready":
        return passed(f"{pod.ref}: the confidential GPUs are ready", expected="ready",
                      found=state, **ev)
    if state in ("not-ready", "not_ready", "notready"):
        return failed(f"{pod.ref}: the confidential GPUs' ready state is {state}: CUDA work is "
                      "refused until it is set", READY_FIX, expected="ready", found=state, **ev)
    return errored(f"{pod.ref}: unknown GPUs ready state {state!r} from nvidia-smi "
                   "conf-compute -grs", **ev)


@_scoped(
    "pod",
    "gpu.cc-attestation",
    title="The pod obtains the profile's attestation resource from its confidential data hub",
    remediation="The KBS releases a resource only when the guest's and the GPU's attestation "
    "is affirming: read the KBS log for the pod's attestation, check its resource policy and "
    "the reference values, and that the guest reaches the KBS (the kernel parameter "
    "agent.aa_kbc_params / the initdata's KBS URL).",
    severity=Severity.CRITICAL,
)
def cc_attestation(subj: PodSubject, profile: Any) -> Outcome:
    got = _cc(subj, profile)
    if isinstance(got, Outcome):
        return got
    cfg, pod, _g, c = got
    if cfg.attestation_url is None:
        return skipped("cluster.gpu.cc.attestation_resource is not set: attestation is not "
                       "judged", **_pod_ev(pod))
    ev = {**_pod_ev(pod), "url": cfg.attestation_url, "cc_attest": c.attest_output,
          "rc": c.attest_rc}
    if c.attest_output is None and c.attest_rc is None:
        return skipped(f"{pod.ref}: its collector fetched no CDH resource (the script was "
                       "built without cluster.gpu.cc's URL)", **ev)
    if c.attest_rc == 127:
        return skipped(f"{pod.ref}: the guest image has neither curl nor wget, so the CDH "
                       "resource could not be fetched", **ev)
    out = c.attest_output or ""
    urls = [ln[4:].strip() for ln in out.splitlines() if ln.startswith("url ")]
    if urls and urls[0] != cfg.attestation_url:
        return errored(f"{pod.ref}: the collector fetched {urls[0]!r}, the profile names "
                       f"{cfg.attestation_url!r}", **ev)
    r = cc_attest_result(out)
    if r is None:
        return errored(f"{pod.ref}: the cc_attest record does not parse: "
                       f"{out[:200]!r}", **ev)
    ev |= {"client": r.client, "http": r.http, "length": r.length}
    if r.released:
        return passed(f"{pod.ref}: the CDH released {cfg.attestation_resource} ({r.length} "
                      f"bytes, content not recorded; via {r.client})",
                      expected="released", found=f"HTTP {r.http or 'OK'}, {r.length} bytes",
                      **ev)
    if r.rc != 0 and r.http in (None, 0):
        why = (f"{r.client} exit {r.rc}" + (f": {r.detail}" if r.detail else "")
               + ": the CDH did not answer (no CDH in the guest, or it is not a confidential "
               "guest?)")
    elif r.http is not None and not 200 <= r.http < 300:
        why = f"HTTP {r.http}" + (f": {r.body}" if r.body else "") + \
            " (the KBS refused the resource or the CDH could not reach it)"
    elif not r.length:
        why = "the resource came back empty"
    else:
        why = f"{r.client} exit {r.rc}" + (f": {r.detail}" if r.detail else "")
    return failed(f"{pod.ref}: {cfg.attestation_resource} was not released: {why}",
                  expected="released", found=why[:200], **ev)
