// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 version that the pinned
// k8s.io/kubernetes release requires, so the API server always talks to the etcd it was tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
