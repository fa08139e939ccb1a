//go:build tools

// Package tools pins the Kueue controller manager this module builds, for the cluster tier's queueing tests.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
