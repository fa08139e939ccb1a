//go:build tools

// Package tools pins the JobSet controller this module builds: the engine Kubeflow Trainer v2 builds TrainJobs
// on, run beside envtest (kubetrain envtest start --jobset) the way a cluster runs JobSet's Deployment.
package tools

import _ "sigs.k8s.io/jobset"
