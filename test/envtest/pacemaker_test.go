package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// validStatusCase is openshift/api's known-good full status.
const validStatusCase = "Should accept full healthy cluster status with fencingAgents"

// callTimeout bounds all API calls of one check; single calls take 5-40 ms
// once Start has warmed the control plane up.
const callTimeout = 30 * time.Second

func TestPacemakerClusterV1(t *testing.T) {
	env := Start(t, Options{PacemakerCluster: PacemakerV1, DruidEtcd: true})
	newObj := func() client.Object { return &etcdv1.PacemakerCluster{} }
	checkPacemakerCluster(t, env, PacemakerV1, newObj)
	checkEtcdletStatuses(t, env, PacemakerV1, newObj)
	checkDruidEtcd(t, env)
}

func TestPacemakerClusterV1alpha1(t *testing.T) {
	env := Start(t, Options{PacemakerCluster: PacemakerV1alpha1})
	newObj := func() client.Object { return &etcdv1alpha1.PacemakerCluster{} }
	checkPacemakerCluster(t, env, PacemakerV1alpha1, newObj)
	checkEtcdletStatuses(t, env, PacemakerV1alpha1, newObj)
}

// checkPacemakerCluster writes PacemakerCluster the way etcdlet will (the
// singleton created without status, then status through /status) and checks
// that the real CRD accepts openshift's valid status and rejects each of its
// invalid ones with the CRD's message.
func checkPacemakerCluster(t *testing.T, env *Env, v PacemakerVersion, newObj func() client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	c := env.Client
	suite := loadPacemakerSuite(t, v)

	cluster := newObj()
	cluster.SetName("cluster")
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatalf("create PacemakerCluster %s/cluster: %v", v, err)
	}

	valid := suite.update(t, validStatusCase)
	update := decodeStrict(t, valid.Updated, newObj)
	update.SetResourceVersion(cluster.GetResourceVersion())
	if err := c.Status().Update(ctx, update); err != nil {
		t.Fatalf("update %s status with %q: %v", v, valid.Name, err)
	}
	stored := newObj()
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, stored); err != nil {
		t.Fatalf("get PacemakerCluster %s/cluster: %v", v, err)
	}
	assertStatus(t, stored, valid.Updated)

	rejected := 0
	for _, tc := range suite.Tests.OnUpdate {
		if tc.ExpectedStatusError == "" {
			continue
		}
		rejected++
		bad := decodeStrict(t, tc.Updated, newObj)
		bad.SetResourceVersion(stored.GetResourceVersion())
		err := c.Status().Update(ctx, bad)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.ExpectedStatusError) {
			t.Errorf("%s %q: status update returned %v, want Invalid containing %q", v, tc.Name, err, tc.ExpectedStatusError)
		}
	}
	if rejected == 0 {
		t.Fatalf("openshift/api has no invalid %s status cases; has the test file changed?", v)
	}
	// The rejected updates left the valid status in place.
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, stored); err != nil {
		t.Fatalf("get PacemakerCluster %s/cluster: %v", v, err)
	}
	assertStatus(t, stored, valid.Updated)

	other := newObj()
	other.SetName("other")
	const singleton = "PacemakerCluster must be named 'cluster'"
	if err := c.Create(ctx, other); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), singleton) {
		t.Errorf("create %s PacemakerCluster named other: %v, want Invalid containing %q", v, err, singleton)
	}
}

// decodeStrict decodes a fixture into the typed object, failing on fields
// the Go types do not know: the typed client must be able to say all the
// CRD accepts.
func decodeStrict(t *testing.T, manifest string, newObj func() client.Object) client.Object {
	t.Helper()
	obj := newObj()
	if err := yaml.UnmarshalStrict([]byte(manifest), obj); err != nil {
		t.Fatalf("decode fixture into %T: %v", obj, err)
	}
	return obj
}

// assertStatus compares the status of a typed object read from the server
// with the status in a fixture manifest, as JSON.
func assertStatus(t *testing.T, obj client.Object, manifest string) {
	t.Helper()
	got, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("convert %T: %v", obj, err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &want); err != nil {
		t.Fatalf("decode fixture: %v", err)
	}
	gotJSON, err := json.Marshal(got["status"])
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want["status"])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("stored status differs from the one written:\n got: %s\nwant: %s", gotJSON, wantJSON)
	}
}
