// Package layering holds no code: its test checks that etcdlet's imports
// flow one way (cmd → daemon → daemon/<concern> → config), the rule
// docs/development.md states, so that a change that breaks it fails in
// make test rather than in a later review.
package layering
