//go:build tools

// Package tools pins the Kubeflow Trainer controller this module builds: the peer that the conformance tier
// (tests/peers) compares kubetrain's TrainJob controller with.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
