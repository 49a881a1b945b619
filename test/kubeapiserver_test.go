package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A kubeadm-style control plane with external etcd: a real kube-apiserver
// (built from the module proxy) uses the etcdlet-managed cluster over TLS
// with a client certificate, as kubeadm's etcd.external configures it, and
// keeps serving while a member is replaced underneath it.
func TestKubeAPIServerOnEtcdletCluster(t *testing.T) {
	t.Parallel()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	apiserverBin := filepath.Join(assets, "kube-apiserver")
	if _, err := os.Stat(apiserverBin); assets == "" || err != nil {
		t.Fatal("kube-apiserver not found in KUBEBUILDER_ASSETS: run `make test`, or `export KUBEBUILDER_ASSETS=$(hack/envtest.sh)`")
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for n := 1; n <= 9; n++ {
		ips = append(ips, net.ParseIP(fmt.Sprintf("127.0.%d.%d", netKubeAPIServer, n)))
	}
	files, err := harness.GenerateTLS(t.TempDir(), ips)
	if err != nil {
		t.Fatal(err)
	}
	c, cli := startCluster(t, netKubeAPIServer, 3, func(o *harness.Options) { o.TLS = files })

	dir := t.TempDir()
	saKey := filepath.Join(dir, "sa.key")
	writeECKey(t, saKey)
	token := "etcdlet-test-token"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	apiserver := exec.Command(apiserverBin,
		"--etcd-servers="+strings.Join([]string{c.ClientURL(1), c.ClientURL(2), c.ClientURL(3), c.ClientURL(4)}, ","),
		"--etcd-cafile="+files.CA, "--etcd-certfile="+files.ClientCert, "--etcd-keyfile="+files.ClientKey,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "certs"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.96.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey, "--disable-admission-plugins=ServiceAccount",
		// A loopback address cannot be advertised as the kubernetes service
		// endpoint; envtest switches the reconciler off the same way.
		"--endpoint-reconciler-type=none")
	log, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	apiserver.Stdout, apiserver.Stderr = log, log
	if err := apiserver.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = apiserver.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = apiserver.Process.Kill()
		<-exited
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("kube-apiserver log (tail):\n%s", tailString(string(b), 3000))
		}
	})

	api := &apiClient{base: fmt.Sprintf("https://127.0.0.1:%d", port), token: token}
	harness.Eventually(t, 60*time.Second, "kube-apiserver ready, etcd check included", func() error {
		select {
		case <-exited:
			t.Fatal("kube-apiserver exited")
		default:
		}
		return api.expect(http.MethodGet, "/readyz?verbose", "", http.StatusOK)
	})
	configMap := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"before-replace","namespace":"default"},"data":{"k":"v"}}`
	if err := api.expect(http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap, http.StatusCreated); err != nil {
		t.Fatal(err)
	}

	// Replace member 1 by member 4 under the running API server.
	c.Start(4)
	c.WriteMembers(2, 3, 4)
	c.Wait(cli, convergeTimeout, 2, 3, 4)
	if err := api.expect(http.MethodGet, "/api/v1/namespaces/default/configmaps/before-replace", "", http.StatusOK); err != nil {
		t.Errorf("an object written before the replacement is gone: %v", err)
	}
	after := strings.Replace(configMap, "before-replace", "after-replace", 1)
	harness.Eventually(t, 30*time.Second, "the API server writes after the replacement", func() error {
		return api.expect(http.MethodPost, "/api/v1/namespaces/default/configmaps", after, http.StatusCreated)
	})
}

type apiClient struct{ base, token string }

func (a *apiClient) expect(method, path, body string, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	// The API server's self-signed serving certificate: this test checks
	// etcd behind it, not its serving TLS.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

func writeECKey(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
