//go:build race

package sim

// raceDetector: the race detector slows a schedule about tenfold.
const raceDetector = true
