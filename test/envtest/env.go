package envtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
)

// Options selects what the control plane serves besides the built-in types.
type Options struct {
	// PacemakerCluster installs OpenShift's PacemakerCluster CRD at this
	// version (PacemakerNone: not installed).
	PacemakerCluster PacemakerVersion
	// DruidEtcd installs etcd-druid's CRDs (druid.gardener.cloud/v1alpha1):
	// Etcd, and EtcdOpsTask and EtcdCopyBackupsTask, without which the
	// operator that StartDruid runs does not start all its controllers.
	DruidEtcd bool
}

// Env is a running control plane. Start stops it when the test ends.
type Env struct {
	// Config reaches the kube-apiserver as a system:masters user.
	Config *rest.Config
	// Client is a controller-runtime client with Scheme.
	Client client.Client
	// Scheme is NewScheme's: client-go's types, PacemakerCluster v1 and
	// v1alpha1, and druid v1alpha1.
	Scheme *runtime.Scheme
	// Environment is controller-runtime's handle, for what Env does not
	// cover (for example AddUser for a client with restricted RBAC). Do not
	// call its Stop: the test's cleanup does.
	Environment *crenvtest.Environment
}

const (
	// startTimeout covers etcd and kube-apiserver becoming ready. envtest's
	// default (20 s) is tight on 2 cores while other test packages compile
	// and run; KUBEBUILDER_CONTROLPLANE_START_TIMEOUT still overrides it.
	startTimeout = 60 * time.Second
	// warmUpTimeout bounds waiting for CRDs to be served and bootstrap
	// objects to exist after envtest reports the control plane up.
	warmUpTimeout = 30 * time.Second
)

// Start starts etcd and kube-apiserver from $KUBEBUILDER_ASSETS, installs the
// CRDs opts asks for, and waits until they and the bootstrap objects tests
// rely on (namespace kube-system, priority class system-node-critical) are
// served. It fails the test when anything is missing, and stops the control
// plane in t.Cleanup, also when Start itself fails part way.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	begin := time.Now()
	// controller-runtime's client logs nothing a test asserts; without a
	// logger set it prints a stack trace on first use instead.
	ctrllog.SetLogger(logr.Discard())

	apiServerBin, etcdBin, err := binaries()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	install, err := crdInstallOptions(opts, scheme)
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}

	useExisting := false
	env := &crenvtest.Environment{
		// Never talk to a real cluster, whatever USE_EXISTING_CLUSTER says.
		UseExistingCluster:    &useExisting,
		Scheme:                scheme,
		CRDInstallOptions:     install,
		ErrorIfCRDPathMissing: true,
		ControlPlane: crenvtest.ControlPlane{
			APIServer: &crenvtest.APIServer{Path: apiServerBin},
			Etcd:      &crenvtest.Etcd{Path: etcdBin},
		},
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = startTimeout
	}

	// Registered before Start: when Start fails after etcd and kube-apiserver
	// are up (a bad CRD, say), envtest leaves both running unless stopped, and
	// t.Fatalf below still runs this cleanup.
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			// envtest has already sent SIGKILL after its stop timeout.
			t.Logf("envtest: stop control plane: %v", err)
		}
	})
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: start control plane (binaries from %s): %v", os.Getenv(assetsEnv), err)
	}
	if err := checkLoopback(cfg.Host, env.ControlPlane.Etcd.URL); err != nil {
		t.Fatalf("envtest: %v", err)
	}

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("envtest: create client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), warmUpTimeout)
	defer cancel()
	if err := warmUp(ctx, c, opts); err != nil {
		t.Fatalf("envtest: control plane started but not usable: %v", err)
	}
	t.Logf("envtest: control plane at %s ready in %s", cfg.Host, time.Since(begin).Round(time.Millisecond))
	return &Env{Config: cfg, Client: c, Scheme: scheme, Environment: env}
}

func crdInstallOptions(opts Options, scheme *runtime.Scheme) (crenvtest.CRDInstallOptions, error) {
	install := crenvtest.CRDInstallOptions{Scheme: scheme, ErrorIfPathMissing: true}
	if opts.PacemakerCluster != PacemakerNone {
		p, err := pacemakerCRDPath(opts.PacemakerCluster)
		if err != nil {
			return install, err
		}
		install.Paths = append(install.Paths, p)
	}
	if opts.DruidEtcd {
		crds, err := druidCRDs()
		if err != nil {
			return install, err
		}
		install.CRDs = append(install.CRDs, crds...)
	}
	return install, nil
}

// checkLoopback guards the promise that tests bind only loopback addresses:
// envtest picks its listen addresses by resolving "localhost".
func checkLoopback(apiServerURL string, etcdURL *url.URL) error {
	if etcdURL == nil {
		return fmt.Errorf("envtest did not set the etcd URL")
	}
	for name, raw := range map[string]string{"kube-apiserver": apiServerURL, "etcd": etcdURL.String()} {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("parse the %s URL %q: %w", name, raw, err)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%s listens on %q, not on a loopback IP", name, u.Host)
		}
	}
	return nil
}

// AgentClients returns the agent's own clients (kube.NewClientsFor) as the
// envtest administrator, rate limited as kubernetes.qps and burst set by
// default.
func (e *Env) AgentClients(t testing.TB) *kube.Clients {
	t.Helper()
	c, err := kube.NewClientsFor(e.Config, config.Kubernetes{QPS: config.DefaultKubernetesQPS, Burst: config.DefaultKubernetesBurst})
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	return c
}
