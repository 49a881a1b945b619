package main

import (
	"testing"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
)

// Each state a script must tell apart has its own exit code, and when
// several hold, the most severe wins: an unreachable or quorum-less
// cluster is never reported as a list typo.
func TestStatusExitCode(t *testing.T) {
	healthy := statusreport.Report{Reached: true, Answered: true, Converged: true}
	badList := healthy
	badList.ListProblems = []string{`members.file "/etc/etcdlet/members": no such file`}
	notConverged := healthy
	notConverged.Converged = false
	noQuorum := statusreport.Report{Answered: true}
	noQuorumBadList := noQuorum
	noQuorumBadList.ListProblems = badList.ListProblems
	down := statusreport.Report{}
	downBadList := down
	downBadList.ListProblems = badList.ListProblems
	for _, tc := range []struct {
		name   string
		report statusreport.Report
		waited bool
		want   int
	}{
		{"quorum, valid list", healthy, false, exitOK},
		{"quorum, valid list, converged after --wait", healthy, true, exitOK},
		{"not converged, no --wait: quorum is what counts", notConverged, false, exitOK},
		{"not converged within --wait", notConverged, true, exitNotConverged},
		{"list invalid", badList, false, exitListInvalid},
		{"list invalid outranks a --wait timeout", func() statusreport.Report { r := badList; r.Converged = false; return r }(), true, exitListInvalid},
		{"no quorum", noQuorum, false, exitNoQuorum},
		{"no quorum outranks a bad list", noQuorumBadList, false, exitNoQuorum},
		{"no quorum with --wait", noQuorum, true, exitNoQuorum},
		{"unreachable", down, false, exitUnreachable},
		{"unreachable outranks a bad list", downBadList, true, exitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusCode(tc.report, tc.waited); got != tc.want {
				t.Errorf("statusCode = %d, want %d", got, tc.want)
			}
		})
	}
	codes := map[int]bool{}
	for _, c := range []int{exitOK, exitNotConverged, exitListInvalid, exitNoQuorum, exitUnreachable} {
		if codes[c] {
			t.Errorf("exit code %d is used twice", c)
		}
		codes[c] = true
	}
}
