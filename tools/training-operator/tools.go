//go:build tools

// Package tools records the command this module builds, so `go mod tidy` keeps its dependencies: upstream's
// training operator, the peer of the conformance tier (tests/peers) and of bench/operator_side_by_side.py.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)
