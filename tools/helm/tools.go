//go:build tools

// Package tools records the command this module builds, so `go mod tidy` keeps its dependencies.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
