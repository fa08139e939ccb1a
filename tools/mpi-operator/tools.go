//go:build tools

// Package tools pins the mpi-operator this module builds: the v2beta1 MPIJob's own operator, the peer that
// the conformance tier (tests/peers) and bench/operator_side_by_side.py compare kubetrain with.
package tools

import _ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
