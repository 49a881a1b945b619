package eventually

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatal records the failure a wait reports instead of ending the test.
type fatal struct{ msg string }

func (*fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestAConditionThatComesTrueEndsTheWait(t *testing.T) {
	calls := 0
	var f fatal
	Nil(&f, time.Minute, "the third call", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if f.msg != "" || calls != 3 {
		t.Errorf("failed %q after %d calls; want success on the third", f.msg, calls)
	}
}

func TestTheDeadlineFailsWithWhatWasLastSeen(t *testing.T) {
	var f fatal
	start := time.Now()
	Nil(&f, 50*time.Millisecond, "a member list of three", func() error { return errors.New("two members") })
	if !strings.Contains(f.msg, "a member list of three: not true within 50ms: two members") {
		t.Errorf("failure %q: want what was awaited and the last error", f.msg)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the deadline", time.Since(start))
	}
	f = fatal{}
	True(&f, 0, "ready", func() bool { return false })
	if !strings.Contains(f.msg, "ready: not true within 0s") {
		t.Errorf("True failure %q", f.msg)
	}
}

func TestWithinSaysHowLongAndNeverFails(t *testing.T) {
	calls := 0
	took, err := Within(time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 || took <= 0 {
		t.Errorf("Within = %s, %v after %d calls; want success on the third", took, err, calls)
	}
	took, err = Within(30*time.Millisecond, time.Millisecond, func() error { return errors.New("no leader") })
	if err == nil || err.Error() != "no leader" || took < 30*time.Millisecond {
		t.Errorf("Within = %s, %v; want the last error, at the deadline", took, err)
	}
}
