"""The status endpoint on the cluster: the operator's side of Kubeflow Trainer v2's progress protocol.

Pods get the three ``KUBEFLOW_TRAINER_STATUS_SERVER_*`` variables and a projected volume with a token for
their job's audience and the endpoint's CA (``injection``); the operator keeps the TLS credentials in a
Secret (``credentials``, ``keeper``) and the CA in one ConfigMap per namespace (``ca_bundle``); a report is
checked by TokenReview and against the pod cache (``authenticator``) and coalesced into status writes
(``writes``) and a bounded history (``history``); ``endpoint`` runs it all on an event loop of its own.
The HTTP handling, the TLS credentials' issue and the rate limits are ``kubetrain.progress``'s.
"""
