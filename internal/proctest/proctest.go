// Package proctest answers the tests' questions about processes from
// /proc.
package proctest

import (
	"bytes"
	"fmt"
	"os"
)

// Alive says whether pid is a live process: it exists and is not a
// zombie awaiting its reaper (a killed process whose parent has not
// waited for it yet is dead for every purpose of a test).
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 is the state; the comm field before it is parenthesised
	// and may itself hold a ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || len(stat) <= i+2 || stat[i+2] != 'Z'
}
