"""Where the SDK's jobs live: a Kubernetes cluster, or local runs under a state directory."""
