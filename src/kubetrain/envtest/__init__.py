"""A real Kubernetes control plane on loopback (etcd, kube-apiserver, scheduler, controller-manager)."""
