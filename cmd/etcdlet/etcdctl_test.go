package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
)

func TestEtcdctlArgs(t *testing.T) {
	eps := []string{"https://192.0.2.1:2379", "https://192.0.2.2:2379"}
	tls := config.TLSFiles{CertFile: "/pki/c.crt", KeyFile: "/pki/c.key", CAFile: "/pki/ca.crt"}
	for _, tc := range []struct {
		name string
		tls  config.TLSFiles
		args []string
		want string
	}{
		{"all injected", tls, []string{"get", "foo"},
			"--endpoints=https://192.0.2.1:2379,https://192.0.2.2:2379 --cacert=/pki/ca.crt --cert=/pki/c.crt --key=/pki/c.key get foo"},
		{"plaintext: no TLS flags", config.TLSFiles{}, []string{"member", "list"},
			"--endpoints=https://192.0.2.1:2379,https://192.0.2.2:2379 member list"},
		{"the user's flags win", tls, []string{"--endpoints", "https://192.0.2.9:2379", "--cert=/mine.crt", "get", "foo"},
			"--cacert=/pki/ca.crt --key=/pki/c.key --endpoints https://192.0.2.9:2379 --cert=/mine.crt get foo"},
		{"after etcdctl's --, a flag-like word is a value", tls, []string{"put", "--", "k", "--endpoints"},
			"--endpoints=https://192.0.2.1:2379,https://192.0.2.2:2379 --cacert=/pki/ca.crt --cert=/pki/c.crt --key=/pki/c.key put -- k --endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(etcdctlArgs(eps, tc.tls, tc.args), " "); got != tc.want {
				t.Errorf("args:\n %s\nwant:\n %s", got, tc.want)
			}
		})
	}
}

func TestEtcdctlRefusesMembershipChanges(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		refused bool
	}{
		{[]string{"member", "list"}, false},
		{[]string{"get", "member"}, false},
		{[]string{"put", "move-leader", "x"}, false},
		{[]string{"member", "remove", "8e9e05c52164694d"}, true},
		{[]string{"member", "add", "n4", "--peer-urls=https://192.0.2.4:2380"}, true},
		{[]string{"member", "promote", "1"}, true},
		{[]string{"member", "update", "1", "--peer-urls=x"}, true},
		{[]string{"move-leader", "2"}, true},
		{[]string{"-w", "table", "member", "remove", "1"}, true}, // a global flag's value is no command word
		{[]string{"--endpoints=https://x:2379", "--debug", "move-leader", "2"}, true},
	} {
		err := checkEtcdctl(tc.args, false)
		if (err != nil) != tc.refused {
			t.Errorf("%v: %v, refused want %v", tc.args, err, tc.refused)
		}
		if err := checkEtcdctl(tc.args, true); err != nil {
			t.Errorf("%v with --allow-membership-changes: %v", tc.args, err)
		}
	}
	if got := commandWords([]string{"--write-out", "json", "endpoint", "status", "--cluster"}); !slices.Equal(got, []string{"endpoint", "status"}) {
		t.Errorf("commandWords = %v", got)
	}
}
