// Command kgc-dra-plugin is the cluster lab's minimal DRA kubelet plugin (driver
// dra.kgc.io, lab only). It runs on the lab's real node beside the kubelet, as a host
// process with the node's own credentials (system:node:<name>: the Node authorizer and
// NodeRestriction let a node manage the ResourceSlices whose spec.nodeName is itself,
// k8s.io/kubernetes v1.37.2 plugin/pkg/auth/authorizer/node and
// plugin/pkg/admission/noderestriction).
//
// What it does, all through k8s.io/dynamic-resource-allocation's kubeletplugin helper:
//   - publishes one pool named after its node with a few stand-in GPUs (PublishResources);
//   - registers with the kubelet (plugins_registry) and serves the DRA gRPC API;
//   - Prepare: writes one CDI spec per claim (kind kgc.io/dra, under /var/run/cdi) whose
//     container edits inject an env var and a read-only file naming the device and the
//     claim, and returns the CDI device ids to the kubelet (which hands them to containerd);
//   - Unprepare: removes that spec and the claim's files.
//
// The devices are stand-ins: nothing on the node backs them. Their attributes have the
// names NVIDIA's DRA driver publishes (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin
// deviceinfo.go: productName, uuid, the standard resource.kubernetes.io/pciBusID, the
// capacity memory) so that kgc's DRA collector reads them like a real driver's slice; the
// values are made up (PCI buses no device of the VM sits on) and standIn=true says so.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	cdiKind    = "kgc.io/dra" // CDI vendor/class of the specs this plugin writes
	cdiVersion = "0.6.0"      // a CDI spec version containerd 2.x's CDI library reads
	envPrefix  = "KGC_DRA_"
	mountDir   = "/run/kgc-dra" // where a container sees its devices' files
)

type plugin struct {
	driver, node, cdiDir, stateDir string
	devices                        map[string]resourceapi.Device
	cancel                         context.CancelCauseFunc
}

// standIns returns n stand-in GPUs of node (deterministic: the same node gets the same).
func standIns(node string, n int) []resourceapi.Device {
	var out []resourceapi.Device
	for i := 0; i < n; i++ {
		h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", node, i)))
		uuid := fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
		str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str(uuid),
				"productName":                     str("NVIDIA H200 (kgc lab stand-in)"),
				"brand":                           str("Nvidia"),
				"architecture":                    str("Hopper"),
				"resource.kubernetes.io/pciBusID": str(fmt.Sprintf("0000:%02x:00.0", 0x9d+i)),
				"standIn":                         {BoolValue: ptr.To(true)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("143771Mi")},
			},
		})
	}
	return out
}

// The few CDI spec fields used here (github.com/cncf-tags/container-device-interface,
// specs-go/config.go: version, kind, devices[].name, containerEdits env and mounts).
type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Type          string   `json:"type,omitempty"`
	Options       []string `json:"options,omitempty"`
}
type cdiEdits struct {
	Env    []string   `json:"env,omitempty"`
	Mounts []cdiMount `json:"mounts,omitempty"`
}
type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

func (p *plugin) specPath(uid types.UID) string {
	return filepath.Join(p.cdiDir, "kgc.io-dra_"+string(uid)+".json")
}

// writeAtomically: the runtime's CDI cache watches the directory and must never read a
// half-written spec (it reads only *.json / *.yaml, so the temporary name is neither).
func writeAtomically(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	uid := claim.UID
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	spec := cdiSpec{Version: cdiVersion, Kind: cdiKind}
	var devices []kubeletplugin.Device
	dir := filepath.Join(p.stateDir, string(uid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.driver {
			continue // another driver's device in the same claim
		}
		dev, ok := p.devices[r.Device]
		if r.Pool != p.node || !ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s: device %s/%s is not one of this node's", uid, r.Pool, r.Device)}
		}
		// the last line of defence against two claims on one device: another claim's file
		if others, _ := filepath.Glob(filepath.Join(p.stateDir, "*", r.Device+".json")); len(others) > 0 {
			for _, o := range others {
				if filepath.Dir(o) != dir {
					return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s is prepared for another claim (%s)", r.Device, o)}
				}
			}
		}
		info, _ := json.Marshal(map[string]any{
			"driver": p.driver, "pool": r.Pool, "device": r.Device, "request": r.Request,
			"claim": map[string]string{"namespace": claim.Namespace, "name": claim.Name, "uid": string(uid)},
			"uuid":  *dev.Attributes["uuid"].StringValue, "pciBusID": *dev.Attributes["resource.kubernetes.io/pciBusID"].StringValue,
		})
		file := filepath.Join(dir, r.Device+".json")
		if err := writeAtomically(file, append(info, '\n')); err != nil {
			return kubeletplugin.PrepareResult{Err: err}
		}
		name := string(uid) + "-" + r.Device // unique per claim: no stale CDI cache hit
		env := envPrefix + strings.ToUpper(strings.ReplaceAll(r.Device, "-", "_"))
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiEdits{
			Env: []string{
				fmt.Sprintf("%s=%s/%s claim=%s/%s uid=%s", env, r.Pool, r.Device, claim.Namespace, claim.Name, uid),
				"KGC_DRA_CLAIM_UID=" + string(uid),
			},
			Mounts: []cdiMount{{HostPath: file, ContainerPath: filepath.Join(mountDir, r.Device+".json"),
				Type: "bind", Options: []string{"ro", "nosuid", "nodev", "bind"}}},
		}})
		devices = append(devices, kubeletplugin.Device{
			Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{cdiKind + "=" + name},
		})
	}
	data, _ := json.MarshalIndent(spec, "", " ")
	if err := writeAtomically(p.specPath(uid), append(data, '\n')); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	klog.InfoS("prepared", "claim", klog.KObj(claim), "uid", uid, "devices", len(devices), "cdiSpec", p.specPath(uid))
	return kubeletplugin.PrepareResult{Devices: devices}
}

func (p *plugin) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		out[c.UID] = p.prepare(c)
	}
	return out, nil
}

// UnprepareResourceClaims: idempotent (a claim never prepared here is no error).
func (p *plugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		err := os.Remove(p.specPath(c.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil {
			err = os.RemoveAll(filepath.Join(p.stateDir, string(c.UID)))
		}
		out[c.UID] = err
		klog.InfoS("unprepared", "claim", c.String(), "removed", p.specPath(c.UID), "err", err)
	}
	return out, nil
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.cancel(fmt.Errorf("%s: %w", msg, err)) // fatal: stop (systemd restarts it)
	}
}

func (p *plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "/etc/kubernetes/kubelet.kubeconfig", "credentials (the node's own)")
	node := flag.String("node-name", "", "this node's name (the pool and the slice's spec.nodeName)")
	driver := flag.String("driver", "dra.kgc.io", "DRA driver name")
	count := flag.Int("devices", 2, "stand-in devices to publish")
	cdiDir := flag.String("cdi-dir", kubeletplugin.DefaultCDIDir, "where CDI specs are written")
	stateDir := flag.String("state-dir", "/var/run/kgc-dra", "per-claim files mounted into containers")
	flag.Parse()
	if *node == "" {
		klog.Fatal("--node-name is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	p := &plugin{driver: *driver, node: *node, cdiDir: *cdiDir, stateDir: *stateDir,
		devices: map[string]resourceapi.Device{}, cancel: cancel}
	devs := standIns(*node, *count)
	for _, d := range devs {
		p.devices[d.Name] = d
	}
	for _, d := range []string{*cdiDir, *stateDir, filepath.Join(kubeletplugin.KubeletPluginsDir, *driver), kubeletplugin.KubeletRegistryDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			klog.Fatalf("mkdir %s: %v", d, err)
		}
	}
	helper, err := kubeletplugin.Start(ctx, p, kubeletplugin.DriverName(*driver), kubeletplugin.NodeName(*node),
		kubeletplugin.KubeClient(client), kubeletplugin.HealthService(false))
	if err != nil {
		klog.Fatalf("start: %v", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		*node: {Slices: []resourceslice.Slice{{Devices: devs}}},
	}}); err != nil {
		klog.Fatalf("publish: %v", err)
	}
	klog.InfoS("serving", "driver", *driver, "node", *node, "devices", len(devs))
	<-ctx.Done()
	klog.InfoS("stopping", "cause", context.Cause(ctx))
}
