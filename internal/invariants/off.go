//go:build !invariants

package invariants

// Enabled is false: a release build runs no invariant check, and the
// compiler drops the code behind `if invariants.Enabled`.
const Enabled = false
