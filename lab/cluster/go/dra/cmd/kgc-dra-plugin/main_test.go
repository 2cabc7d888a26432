package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func claim(uid, device string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "dra.kgc.io", Pool: "n", Device: device}}}}},
	}
}

// Prepare writes a CDI spec naming the device and claim, refuses a device another claim
// holds, and Unprepare (idempotent) removes the spec and the claim's files.
func TestPrepareUnprepare(t *testing.T) {
	dir := t.TempDir()
	p := &plugin{driver: "dra.kgc.io", node: "n", cdiDir: filepath.Join(dir, "cdi"),
		stateDir: filepath.Join(dir, "state"), devices: map[string]resourceapi.Device{}}
	for _, d := range standIns("n", 2) {
		p.devices[d.Name] = d
	}
	os.MkdirAll(p.cdiDir, 0o755)
	got, _ := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("u1", "gpu-1")})
	r := got["u1"]
	if r.Err != nil || len(r.Devices) != 1 || r.Devices[0].CDIDeviceIDs[0] != "kgc.io/dra=u1-gpu-1" {
		t.Fatalf("prepare: %+v", r)
	}
	var spec cdiSpec
	data, err := os.ReadFile(p.specPath("u1"))
	if err != nil || json.Unmarshal(data, &spec) != nil {
		t.Fatalf("spec: %v %s", err, data)
	}
	e := spec.Devices[0].ContainerEdits
	if spec.Kind != "kgc.io/dra" || e.Env[0] != "KGC_DRA_GPU_1=n/gpu-1 claim=ns/c-u1 uid=u1" ||
		e.Mounts[0].ContainerPath != "/run/kgc-dra/gpu-1.json" {
		t.Fatalf("spec: %s", data)
	}
	if r := p.prepare(claim("u2", "gpu-1")); r.Err == nil {
		t.Fatal("a device prepared for two claims")
	}
	if r := p.prepare(claim("u1", "gpu-1")); r.Err != nil { // idempotent
		t.Fatal(r.Err)
	}
	objs := []kubeletplugin.NamespacedObject{{UID: "u1"}, {UID: "never"}}
	errs, _ := p.UnprepareResourceClaims(context.Background(), objs)
	if errs["u1"] != nil || errs["never"] != nil {
		t.Fatalf("unprepare: %v", errs)
	}
	if _, err := os.Stat(p.specPath("u1")); !os.IsNotExist(err) {
		t.Fatal("spec left behind")
	}
	if _, err := os.Stat(filepath.Join(p.stateDir, "u1")); !os.IsNotExist(err) {
		t.Fatal("claim files left behind")
	}
}
