//go:build tools

// Package tools pins the scheduler-plugins scheduler this module builds.
package tools

import _ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
