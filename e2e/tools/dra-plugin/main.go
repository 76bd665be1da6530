// Command isvc-dra-plugin is the fake GPU DRA driver's kubelet plugin for the test bed's real node.
//
// It registers with the kubelet as driver gpu.nvidia.com, publishes the node's simulated devices (a JSON
// list of resource.k8s.io/v1 Devices that the test bed renders in the same shape as the KWOK fleet's slices)
// as the node's ResourceSlice pool, and prepares claims by writing one CDI spec per claim: every allocated
// device becomes a CDI device whose edits put its uuid into the container's environment. A record per
// prepared claim (in --state-dir) is what NodeUnprepareResources removes together with the CDI spec.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

const cdiClass = "claim"

var envName = regexp.MustCompile(`[^A-Z0-9]+`)

type plugin struct {
	driver   string
	pool     string
	devices  map[string]resourceapi.Device
	cdiDir   string
	stateDir string
	cancel   context.CancelCauseFunc
}

// record is what a prepared claim leaves in --state-dir: enough to undo it without the claim.
type record struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Devices   []string `json:"devices"`
	CDIFile   string   `json:"cdiFile"`
}

func (p *plugin) cdiKind() string { return "k8s." + p.driver + "/" + cdiClass }

func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		out[claim.UID] = p.prepare(claim)
	}
	return out, nil
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	var result kubeletplugin.PrepareResult
	var cdiDevices []map[string]any
	rec := record{Namespace: claim.Namespace, Name: claim.Name}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != p.driver {
			continue
		}
		dev, ok := p.devices[r.Device]
		if r.Pool != p.pool || !ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s/%s is not one of this node's", r.Pool, r.Device)}
		}
		uuid := ""
		if a, found := dev.Attributes["uuid"]; found && a.StringValue != nil {
			uuid = *a.StringValue
		}
		name := string(claim.UID) + "-" + r.Device
		key := envName.ReplaceAllString(strings.ToUpper(r.Device), "_")
		cdiDevices = append(cdiDevices, map[string]any{
			"name": name,
			"containerEdits": map[string]any{"env": []string{
				"ISVC_TESTBED_" + key + "_UUID=" + uuid,
				"NVIDIA_VISIBLE_DEVICES=" + uuid,
			}},
		})
		result.Devices = append(result.Devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{p.cdiKind() + "=" + name},
			ShareID:      r.ShareID,
		})
		rec.Devices = append(rec.Devices, r.Device)
	}
	rec.CDIFile = filepath.Join(p.cdiDir, "isvc-testbed-"+string(claim.UID)+".json")
	spec := map[string]any{"cdiVersion": "0.6.0", "kind": p.cdiKind(), "devices": cdiDevices}
	if err := writeJSON(rec.CDIFile, spec); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	if err := writeJSON(filepath.Join(p.stateDir, string(claim.UID)+".json"), rec); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	return result
}

func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		path := filepath.Join(p.stateDir, string(claim.UID)+".json")
		var rec record
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			out[claim.UID] = nil // not prepared here (or already undone): idempotent
			continue
		}
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err == nil && rec.CDIFile != "" {
			if err = os.Remove(rec.CDIFile); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		}
		if err == nil {
			err = os.Remove(path)
		}
		out[claim.UID] = err
	}
	return out, nil
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}

// writeJSON writes atomically: a reader (containerd's CDI cache) never sees half a file.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig with the node's credentials")
	nodeName := flag.String("node-name", "", "the node the devices belong to (also the pool name)")
	driver := flag.String("driver", "gpu.nvidia.com", "DRA driver name")
	devicesFile := flag.String("devices", "", "JSON list of resource.k8s.io/v1 Devices to publish")
	registryDir := flag.String("registry-dir", "", "the kubelet's plugins_registry directory")
	pluginDir := flag.String("plugin-dir", "", "directory for the DRA gRPC socket")
	cdiDir := flag.String("cdi-dir", "", "CDI spec directory the container runtime reads")
	stateDir := flag.String("state-dir", "", "directory for the records of prepared claims")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *nodeName, *driver, *devicesFile, *registryDir, *pluginDir, *cdiDir, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "isvc-dra-plugin:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName, driver, devicesFile, registryDir, pluginDir, cdiDir, stateDir string) error {
	for flagName, v := range map[string]string{"kubeconfig": kubeconfig, "node-name": nodeName, "devices": devicesFile,
		"registry-dir": registryDir, "plugin-dir": pluginDir, "cdi-dir": cdiDir, "state-dir": stateDir} {
		if v == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	var devices []resourceapi.Device
	data, err := os.ReadFile(devicesFile)
	if err == nil {
		err = json.Unmarshal(data, &devices)
	}
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	for _, dir := range []string{pluginDir, cdiDir, stateDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; cancel(errors.New("signalled")) }()

	p := &plugin{driver: driver, pool: nodeName, devices: map[string]resourceapi.Device{}, cdiDir: cdiDir,
		stateDir: stateDir, cancel: cancel}
	for _, d := range devices {
		p.devices[d.Name] = d
	}
	helper, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.KubeClient(client),
		kubeletplugin.DriverName(driver),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.RegistrarDirectoryPath(registryDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return err
	}
	defer helper.Stop()
	pools := map[string]resourceslice.Pool{nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}}}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: pools}); err != nil {
		return err
	}
	// The test bed waits for this line: the kubelet has taken the plugin (it then keeps the slices).
	for ctx.Err() == nil {
		if s := helper.RegistrationStatus(); s != nil && s.PluginRegistered {
			fmt.Printf("isvc-dra-plugin: registered %s with the kubelet of %s, %d device(s)\n", driver, nodeName,
				len(devices))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && cause.Error() != "signalled" {
		return cause
	}
	return nil
}
