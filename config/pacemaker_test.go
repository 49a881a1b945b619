package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultPacemakerIsValid(t *testing.T) {
	o := DefaultPacemaker()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if o.CrmMon != "/usr/sbin/crm_mon" || o.Cibadmin != "/usr/sbin/cibadmin" || o.CorosyncCmapctl != "/usr/sbin/corosync-cmapctl" || o.KubeletAgent != "systemd:kubelet" || o.EtcdAgent != "ocf:heartbeat:podman-etcd" ||
		o.APIVersion != "v1" || o.ExpectedNodes != 2 || o.Enabled || o.Interval != 15*time.Second || o.CommandTimeout != 10*time.Second || o.MaxOutputBytes != 10<<20 {
		t.Errorf("defaults = %+v", o)
	}
}

func TestPacemakerValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Pacemaker)
		want   string // the whole rendered error; empty: valid
	}{
		{"agent without colon", func(o *Pacemaker) { o.KubeletAgent = "systemd kubelet" },
			`pacemaker.kubeletAgent: "systemd kubelet": must be <class>:[<provider>:]<type>`},
		{"ocf without provider", func(o *Pacemaker) { o.EtcdAgent = "ocf:podman-etcd" },
			`pacemaker.etcdAgent: "ocf:podman-etcd": must be ocf:<provider>:<type> for class ocf`},
		{"provider outside ocf", func(o *Pacemaker) { o.KubeletAgent = "systemd:x:kubelet" },
			`pacemaker.kubeletAgent: "systemd:x:kubelet": must be <class>:<type> (only class ocf has a provider)`},
		{"stonith class", func(o *Pacemaker) { o.EtcdAgent = "stonith:fence_redfish" },
			`pacemaker.etcdAgent: "stonith:fence_redfish": must not select fencing devices (class stonith)`},
		{"bad wildcard", func(o *Pacemaker) { o.EtcdAgent = "ocf:[:x" },
			`pacemaker.etcdAgent: "ocf:[:x": has an invalid wildcard pattern: syntax error in pattern`},
		{"wildcards", func(o *Pacemaker) { o.EtcdAgent = "ocf:*:podman-etcd" }, ""},
		{"same agents", func(o *Pacemaker) { o.EtcdAgent = "SYSTEMD:kubelet" },
			`pacemaker.etcdAgent: "SYSTEMD:kubelet": is the same as kubeletAgent: set kubeletResources and etcdResources to tell the resources apart`},
		{"same agents with ids", func(o *Pacemaker) {
			o.KubeletAgent, o.EtcdAgent = "ocf:pacemaker:Dummy", "ocf:pacemaker:Dummy"
			o.KubeletResources, o.EtcdResources = []string{"kubelet"}, []string{"etcd"}
		}, ""},
		{"bad resource id", func(o *Pacemaker) { o.EtcdResources = []string{"etcd clone"} },
			`pacemaker.etcdResources[0]: "etcd clone": must be a pacemaker resource id (a letter or _, then letters, digits, '.', '_' or '-')`},
		{"id in both lists", func(o *Pacemaker) { o.KubeletResources, o.EtcdResources = []string{"x"}, []string{"x"} },
			`pacemaker.etcdResources[0]: "x": is also listed in kubeletResources`},
		// Programs run as root: never looked up in PATH, never relative.
		{"program name", func(o *Pacemaker) { o.CrmMon = "crm_mon" },
			`pacemaker.crmMon: "crm_mon": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/crm_mon`},
		{"relative program path", func(o *Pacemaker) { o.Cibadmin = "bin/cibadmin" },
			`pacemaker.cibadmin: "bin/cibadmin": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/cibadmin`},
		{"dot-relative program path", func(o *Pacemaker) { o.CorosyncCmapctl = "./corosync-cmapctl" },
			`pacemaker.corosyncCmapctl: "./corosync-cmapctl": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/corosync-cmapctl`},
		{"empty program path", func(o *Pacemaker) { o.CrmMon = "" },
			`pacemaker.crmMon: "": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/crm_mon`},
		{"newline in program path", func(o *Pacemaker) { o.CrmMon = "/usr/sbin/crm_mon\n" },
			`pacemaker.crmMon: "/usr/sbin/crm_mon\n": must not contain a NUL or newline character`},
		{"absolute program paths", func(o *Pacemaker) {
			o.CrmMon, o.Cibadmin, o.CorosyncCmapctl = "/opt/pacemaker/bin/crm_mon", "/usr/bin/cibadmin", "/sbin/corosync-cmapctl"
		}, ""},
		{"relative CIB file", func(o *Pacemaker) { o.CIBFile = "cib.xml" }, `pacemaker.cibFile: "cib.xml": must be an absolute path`},
		{"zero timeout", func(o *Pacemaker) { o.CommandTimeout = -time.Second },
			`pacemaker.commandTimeout: "-1s": must be greater than 0 and at most 10m0s`},
		{"interval below a second", func(o *Pacemaker) { o.Interval = 100 * time.Millisecond },
			`pacemaker.interval: "100ms": must be at least 1s`},
		{"tiny output limit", func(o *Pacemaker) { o.MaxOutputBytes = 100 },
			`pacemaker.maxOutputBytes: 100: must be between 65536 and 1073741824`},
		{"api version", func(o *Pacemaker) { o.APIVersion = "v2" }, `pacemaker.apiVersion: "v2": must be v1 or v1alpha1`},
		{"v1alpha1", func(o *Pacemaker) { o.APIVersion = "v1alpha1" }, ""},
		{"six nodes", func(o *Pacemaker) { o.ExpectedNodes = 6 },
			`pacemaker.expectedNodes: 6: must be between 1 and 5 (the API carries at most 5 nodes)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultPacemaker()
			tt.mutate(&o)
			err := o.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error = %v\nwant    %s", err, tt.want)
			}
			var errs Errors
			if !errors.As(err, &errs) || !strings.HasPrefix(errs[0].Path, "pacemaker.") {
				t.Errorf("error is not an Errors list with a YAML path: %#v", err)
			}
		})
	}
}

func TestPacemakerValidateReportsEveryProblem(t *testing.T) {
	o := Pacemaker{} // nothing set, no defaults applied
	err := o.Validate()
	if err == nil {
		t.Fatal("empty options accepted")
	}
	for _, field := range []string{"interval", "crmMon", "cibadmin", "corosyncCmapctl", "commandTimeout", "maxOutputBytes", "kubeletAgent", "etcdAgent", "apiVersion", "expectedNodes"} {
		if !strings.Contains(err.Error(), "pacemaker."+field+":") {
			t.Errorf("no error for %s in:\n%v", field, err)
		}
	}
}

func TestPacemakerSectionInConfigFile(t *testing.T) {
	got := parseAndValidate(t, base+"pacemaker:\n  enabled: true\n  expectedNodes: 9\n  kubeletagent: x\n")
	want := []string{"pacemaker.kubeletagent: unknown field (line 9); known fields here: apiVersion, cibFile, cibadmin, commandTimeout, corosyncCmapctl, corosyncConf, crmMon, enabled, etcdAgent, etcdResources, expectedNodes, interval, kubeletAgent, kubeletResources, maxOutputBytes"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q", got)
	}
	got = parseAndValidate(t, base+"pacemaker:\n  enabled: true\n  expectedNodes: 9\n")
	want = []string{"pacemaker.expectedNodes: 9: must be between 1 and 5 (the API carries at most 5 nodes)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q", got)
	}
}

// A configuration file that names a tool without a path is refused with
// the field, the value and the rule, like every other problem.
func TestPacemakerProgramNamesInConfigFile(t *testing.T) {
	got := parseAndValidate(t, base+"pacemaker:\n  enabled: true\n  crmMon: crm_mon\n  cibadmin: /usr/sbin/cibadmin\n  corosyncCmapctl: corosync-cmapctl\n")
	want := []string{
		`pacemaker.crmMon: "crm_mon": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/crm_mon`,
		`pacemaker.corosyncCmapctl: "corosync-cmapctl": must be an absolute path (a program run as root is never looked up in PATH), e.g. /usr/sbin/corosync-cmapctl`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
