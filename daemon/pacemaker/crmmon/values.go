package crmmon

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bool is a boolean attribute that may be absent: a missing attribute is
// Unknown, never silently false.
type Bool uint8

// Bool values.
const (
	Unknown Bool = iota
	False
	True
)

// Of converts a Go bool.
func Of(b bool) Bool {
	if b {
		return True
	}
	return False
}

// IsTrue reports whether the value is known and true.
func (b Bool) IsTrue() bool { return b == True }

// IsFalse reports whether the value is known and false.
func (b Bool) IsFalse() bool { return b == False }

// Not negates a known value; Unknown stays Unknown.
func (b Bool) Not() Bool {
	switch b {
	case True:
		return False
	case False:
		return True
	default:
		return Unknown
	}
}

// Or returns b if known, else def: for attributes whose absence has a
// documented default (e.g. "blocked" was optional before 2.1).
func (b Bool) Or(def bool) bool {
	if b == Unknown {
		return def
	}
	return b == True
}

func (b Bool) String() string {
	switch b {
	case True:
		return "true"
	case False:
		return "false"
	default:
		return "unknown"
	}
}

// Roles as pacemaker 2.1+ names them. Pre-2.1 Master/Slave are mapped to
// Promoted/Unpromoted.
const (
	RoleStopped    = "Stopped"
	RoleStarted    = "Started"
	RolePromoted   = "Promoted"
	RoleUnpromoted = "Unpromoted"
	RoleUnknown    = "Unknown"
)

// NormalizeRole canonicalises a role (or target-role) string, which
// pacemaker may echo verbatim from user input ("stopped", "Master").
// Pending pseudo-roles (Starting, Stopping, Migrating, …) keep their
// capitalised name; anything unrecognised is returned as given.
func NormalizeRole(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "stopped":
		return RoleStopped
	case "started":
		return RoleStarted
	case "promoted", "master":
		return RolePromoted
	case "unpromoted", "slave":
		return RoleUnpromoted
	case "unknown":
		return RoleUnknown
	case "starting":
		return "Starting"
	case "stopping":
		return "Stopping"
	case "migrating":
		return "Migrating"
	case "promoting":
		return "Promoting"
	case "demoting":
		return "Demoting"
	default:
		return s
	}
}

// warner collects interpretation problems while a document is converted.
type warner struct {
	warnings []string
	loc      *time.Location
}

func (w *warner) warnf(format string, args ...any) {
	w.warnings = append(w.warnings, fmt.Sprintf(format, args...))
}

// boolean parses a pacemaker boolean as crm_is_true does (true/yes/on/1 and
// their negations, any case). Absent is Unknown; unparsable is Unknown with
// a warning.
func (w *warner) boolean(where, attr, v string) Bool {
	b := ParseBool(v)
	if b == Unknown && strings.TrimSpace(v) != "" {
		w.warnf("%s: %s=%q is not a boolean", where, attr, v)
	}
	return b
}

// ParseBool parses a pacemaker boolean as crm_is_true does (true/yes/on/
// y/1 and their negations, any case); anything else is Unknown.
func ParseBool(v string) Bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "y", "1":
		return True
	case "false", "no", "off", "n", "0":
		return False
	}
	return Unknown
}

// integer parses an integer attribute; absent or unparsable gives def.
func (w *warner) integer(where, attr, v string, def int) int {
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		w.warnf("%s: %s=%q is not an integer", where, attr, v)
		return def
	}
	return n
}

// millis parses an interval that crm_mon prints either as "30000ms"
// (operation_history) or as a bare number of milliseconds (failure).
func (w *warner) millis(where, attr, v string) time.Duration {
	t := strings.TrimSuffix(strings.TrimSpace(v), "ms")
	if t == "" {
		return 0
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		w.warnf("%s: %s=%q is not a number of milliseconds", where, attr, v)
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// Timestamp formats found in one crm_mon document.
const (
	// ctimeLayout is C's ctime(): local time without a zone, day of month
	// space-padded. Used for last_update, last_change, operation
	// last-rc-change/last-run and resource_history last-failure.
	ctimeLayout = time.ANSIC
	// isoUTCLayout covers "2012-07-18 00:29:56Z"; Go accepts the optional
	// ".123456" fraction that 2.1.6+ prints, without it in the layout.
	isoUTCLayout = "2006-01-02 15:04:05Z07:00"
	// isoOffsetLayout is what pacemaker prints for a non-UTC zone: a space
	// before the offset ("2012-07-18 02:29:56 +02:00").
	isoOffsetLayout = "2006-01-02 15:04:05 -07:00"
)

// ctime parses a ctime() timestamp in the node's local zone. Empty is
// zero without a warning (offline CIBs have empty last_change).
func (w *warner) ctime(where, attr, v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if t, err := time.ParseInLocation(ctimeLayout, v, w.loc); err == nil {
		return t
	}
	// Some builds print ISO 8601 here; accept it rather than lose the time.
	if t, ok := parseISO(v); ok {
		return t
	}
	w.warnf("%s: %s=%q is not a ctime() timestamp", where, attr, v)
	return time.Time{}
}

// iso parses the ISO 8601 style that failures and fence events use.
func (w *warner) iso(where, attr, v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if t, ok := parseISO(v); ok {
		return t
	}
	if t, err := time.ParseInLocation(ctimeLayout, v, w.loc); err == nil {
		return t
	}
	w.warnf("%s: %s=%q is not an ISO 8601 timestamp", where, attr, v)
	return time.Time{}
}

func parseISO(v string) (time.Time, bool) {
	for _, layout := range []string{isoUTCLayout, isoOffsetLayout, time.RFC3339Nano} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
