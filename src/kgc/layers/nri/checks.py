"""Layer ``nri``: verdicts that rest on events the probe OBSERVED, never on a handshake alone.

(containerd 1.7 keeps a plugin that missed a Synchronize deadline connected yet sends it
no events; only an event proves NRI works.)
"""

from __future__ import annotations

from typing import Any

from kgc.core.model import Outcome, Registry, Severity, errored, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.containerd import NRI_SECTION, nri_enable_snippet
from kgc.layers.nri.collect import NriEvidence

CHECKS = Registry()


def _why_no_events(ev: NriEvidence, profile: Profile) -> tuple[str, str]:
    """(reason, remediation) for the earliest stage that failed."""
    rc = ev.runtime_context
    if ev.connect_error:
        reason = f"the probe could not join NRI: {ev.connect_error}"
        fix = rc.get("nri_fix")  # computed from the node's config (older bundles lack it)
        remedy = "Enable NRI with connections allowed and restart containerd:" + (
            f" {fix}" if fix else f"\n{nri_enable_snippet(ev.socket_path)}")
        cri_err = str(ev.cri_status.get("error", ""))
        if rc.get("cri_loaded") is False and not ev.socket_exists:
            reason += (f"; {rc.get('cri_failure')}, and containerd opens the NRI socket only "
                       "with its CRI plugin")
            remedy = str(rc.get("cri_fix") or remedy)
        elif "unknown service runtime.v1.RuntimeService" in cri_err and not ev.socket_exists:
            reason += (f"; containerd does not serve CRI ({cri_err}): its CRI plugin did not "
                       "load, and containerd opens the NRI socket only with it")
            remedy = ("Find why the CRI plugin failed (`ctr plugins ls -d`, `journalctl -u "
                      "containerd | grep 'failed to load plugin'`), fix the config and restart "
                      "containerd.")
        elif rc.get("disable_connections") is True:
            reason += (
                f"; the containerd config sets disable_connections = true in {NRI_SECTION}, so no "
                "socket is offered to external plugins"
            )
            remedy = f"Set disable_connections = false in {NRI_SECTION} and restart containerd."
        elif rc.get("enabled") is False:
            reason += f"; NRI is disabled: {rc.get('why', '')}"
        elif rc.get("enabled") is True and not ev.socket_exists:
            reason += (f"; NRI is enabled in containerd's config ({rc.get('why', '')}) but "
                       f"{ev.socket_path} does not exist: containerd is not running, or was not "
                       "restarted since NRI was enabled")
            remedy = ("Start or restart containerd (`systemctl restart containerd`) and check its "
                      "log (`journalctl -u containerd | grep -i nri`); NRI is already enabled in "
                      "its config.")
        elif not ev.socket_exists:
            reason += f"; {ev.socket_path} does not exist"
        return reason, remedy
    if ev.trigger_error:
        return (
            f"the probe registered, but its probe pod could not be run: {ev.trigger_error}",
            "Give the probe a usable CRI socket and images (profile nri.cri_socket, "
            "nri.sandbox_image, nri.probe_image), or use nri.trigger: passive on a node where "
            "the cluster starts pods.",
        )
    hs = ev.handshake
    return (
        f"the probe registered as {hs.get('plugin')} (handshake "
        f"{'completed' if hs.get('synchronized') else 'incomplete'}) but observed no pod/container "
        f"event within {profile.nri.event_timeout_s:.0f}s"
        + (f" (probe error: {ev.probe_error})" if ev.probe_error else ""),
        "Check the containerd log for the plugin (`journalctl -u containerd | grep -i nri`): a "
        "plugin that missed a deadline stays connected on containerd 1.7 but gets no events.",
    )


def _gate(ev: NriEvidence) -> Outcome | None:
    if ev.mode == "unavailable":
        return skipped(f"the live NRI probe did not run: {ev.unavailable}", socket=ev.socket_path)
    return None


@CHECKS.check(
    "nri.events",
    title="An NRI plugin registered on the node receives real pod/container lifecycle events",
    remediation=f"Enable NRI in containerd:\n{nri_enable_snippet()}",
    severity=Severity.BLOCKER,
)
def events(ev: NriEvidence, profile: Profile) -> Outcome:
    gate = _gate(ev)
    if gate:
        return gate
    own = ev.own_events()
    names = sorted({e["event"] for e in own})
    evidence: dict[str, Any] = {
        "socket": ev.socket_path,
        "plugin": ev.handshake.get("plugin"),
        "runtime": " ".join(
            [
                str(ev.handshake.get("runtime_name", "")),
                str(ev.handshake.get("runtime_version", "")),
            ]
        ).strip(),
        "events": [f"{e['event']} via {e.get('via', '?')} +{e.get('t_ms', 0)}ms"
                   for e in own][:20],
        "pod": ev.pod,
        "latencies_ms": ev.latencies_ms,
    }
    if ev.trigger == "cri":
        want = {"RUN_POD_SANDBOX"} | ({"CREATE_CONTAINER"} if ev.pod.get("image") else set())
        if want <= set(names):
            return passed(
                f"observed {', '.join(sorted(want))} for probe pod {ev.pod.get('name')} "
                f"({evidence['runtime']})",
                **evidence,
            )
        if own:
            return failed(
                f"observed only {', '.join(names)} for probe pod {ev.pod.get('name')}; missing "
                f"{', '.join(sorted(want - set(names)))}",
                "Check the containerd log for NRI errors around the probe pod.",
                **evidence,
            )
    elif own:
        return passed(f"observed {', '.join(names)} ({evidence['runtime']})", **evidence)
    reason, remedy = _why_no_events(ev, profile)
    return failed(reason, remedy, **evidence)


@CHECKS.check(
    "nri.adjustment",
    title="The runtime applies an NRI container adjustment (env var on the probe's own pod)",
    remediation="Use a containerd whose NRI applies CreateContainer adjustments (1.7+).",
    severity=Severity.CRITICAL,
)
def adjustment(ev: NriEvidence, profile: Profile) -> Outcome:
    gate = _gate(ev)
    if gate:
        return gate
    adj = ev.adjustment
    if not profile.nri.allow_adjustment:
        return skipped("the profile disables the probe's adjustment (nri.allow_adjustment: false)")
    if ev.trigger != "cri":
        return skipped(
            "passive probe (nri.trigger: passive): it never adjusts pods it did not create"
        )
    if not ev.pod.get("image") and not ev.connect_error:
        return skipped("no probe container image (nri.probe_image) to run the adjusted container")
    created = [e for e in ev.own_events() if e["event"] == "CREATE_CONTAINER"]
    evidence: dict[str, Any] = {
        "env": adj.get("env"),
        "expected": adj.get("expected"),
        "seen": adj.get("seen"),
        "adjusted_events": len([e for e in created if e.get("adjusted")]),
    }
    if not created:
        reason, remedy = _why_no_events(ev, profile)
        return failed(f"no CreateContainer event to adjust: {reason}", remedy, **evidence)
    if adj.get("seen") is None:
        return errored(
            f"the container was created but its environment could not be read back "
            f"({ev.trigger_error or 'exec did not run'})",
            "Check that the probe image has /bin/sh and that CRI ExecSync works.",
            **evidence,
        )
    if adj.get("seen") != adj.get("expected"):
        return failed(
            f"the probe asked for {adj.get('env')}={adj.get('expected')} on its container but the "
            f"container sees {adj.get('seen')!r}: the runtime did not apply the NRI adjustment",
            "Check containerd's NRI adjustment support and its log for the plugin's "
            "CreateContainer reply.",
            **evidence,
        )
    return passed(
        f"{adj.get('env')} injected by NRI is visible inside the probe container", **evidence
    )


@CHECKS.check(
    "nri.handshake",
    title="Probe handshake (connect -> Synchronize answered) is fast, and events follow it",
    remediation="Investigate a slow or overloaded containerd (the runtime's NRI deadline is 2 s).",
    severity=Severity.NORMAL,
)
def handshake(ev: NriEvidence, profile: Profile) -> Outcome:
    gate = _gate(ev)
    if gate:
        return gate
    hs = ev.handshake
    ms = hs.get("handshake_ms")
    evidence: dict[str, Any] = {
        "handshake_ms": ms,
        "budget_ms": profile.nri.handshake_budget_ms,
        "runtime_version": hs.get("runtime_version"),
        "sync_chunks": hs.get("sync_chunks"),
        "configure_timeout_nano": hs.get("configure_timeout_nano"),
    }
    if ms is None:
        reason, remedy = _why_no_events(ev, profile)
        return failed(f"no completed handshake: {reason}", remedy, **evidence)
    if not ev.own_events():
        reason, remedy = _why_no_events(ev, profile)
        return failed(
            f"handshake took {ms:.1f} ms, but a handshake alone proves nothing: {reason}",
            remedy,
            **evidence,
        )
    if ms > profile.nri.handshake_budget_ms:
        return warned(
            f"handshake took {ms:.1f} ms (budget {profile.nri.handshake_budget_ms:.0f} ms)",
            **evidence,
        )
    return passed(f"handshake {ms:.1f} ms, then events observed", **evidence)


@CHECKS.check(
    "nri.own-pods-only",
    title="The probe adjusted nothing but its own probe pods",
    remediation="This is a kgc defect; report it with the evidence bundle.",
    severity=Severity.CRITICAL,
)
def own_pods_only(ev: NriEvidence, profile: Profile) -> Outcome:
    gate = _gate(ev)
    if gate:
        return gate
    if not ev.events:
        # nothing was observed, so nothing can show what the probe did or did not touch
        why, _fix = _why_no_events(ev, profile)
        return skipped(f"no NRI event was observed, so there is nothing to judge ({why})")
    adjusted = [e for e in ev.events if e.get("adjusted")]
    foreign = [
        e
        for e in adjusted
        if e.get("pod_labels", {}).get("kgc.io/nri-probe") != ev.token or not ev.token
    ]
    if foreign:
        return failed(
            f"the probe adjusted {len(foreign)} container(s) outside its probe pod: "
            + ", ".join(f"{e.get('pod_namespace')}/{e.get('pod_name')}" for e in foreign),
            foreign=foreign,
        )
    others = len([e for e in ev.events if e not in ev.own_events()])
    return passed(
        f"{len(adjusted)} adjustment(s), all on the probe's own pod; {others} other "
        "event(s) observed read-only",
        adjusted=len(adjusted),
    )
