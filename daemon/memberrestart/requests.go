package memberrestart

import "context"

// Requests carries the handler's asks to the agent's loop.
type Requests struct{ c chan Request }

// NewRequests makes the channel between the handler and the loop.
func NewRequests() *Requests { return &Requests{c: make(chan Request)} }

// C is where the loop receives the asks.
func (r *Requests) C() <-chan Request { return r.c }

// Ask is what a request asks of the loop.
type Ask int

const (
	// AskAllowed asks whether the local member may restart now (Allowed).
	AskAllowed Ask = iota
	// AskRestart asks the loop to restart it: it stops the member, and
	// the next pass starts it with the spec in force.
	AskRestart
	// AskCaughtUp asks whether the member is back as a voter caught up
	// with the leader (CaughtUp).
	AskCaughtUp
)

// Request is one ask, with the restart's reason for the loop's log. The
// loop answers every request once.
type Request struct {
	Ask    Ask
	Reason string
	reply  chan reply // buffered: the loop never waits on a caller gone away
}

type reply struct {
	memberID uint64
	err      error
}

// Answer gives the loop's answer: the local member's ID, and why it may
// not restart, why the restart failed, or why it is not caught up.
func (r Request) Answer(memberID uint64, err error) { r.reply <- reply{memberID, err} }

// ask hands a request to the loop and waits for its answer.
func (r *Requests) ask(ctx context.Context, ask Ask, reason string) (uint64, error) {
	req := Request{Ask: ask, Reason: reason, reply: make(chan reply, 1)}
	select {
	case r.c <- req:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	select {
	case a := <-req.reply:
		return a.memberID, a.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}
