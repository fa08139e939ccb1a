"""The status endpoint on the cluster: the operator's side of Kubeflow Trainer v2's progress protocol.

Pods get Trainer v2.3's three ``KUBEFLOW_TRAINER_SERVER_*`` variables and a projected volume with a token for
their job's audience and the endpoint's CA (``injection``). The operator keeps the TLS credentials in a Secret
(``credentials``: what it holds and how it is renewed; ``keeper``: every replica's copy) and the CA in one
ConfigMap per namespace (``ca_bundle``). A report arrives through a listener with a bound on open connections
(``listener``), is checked by TokenReview and against the pod cache (``authenticator``), and is coalesced into
status writes (``writes``) and a bounded history in a ConfigMap the job owns (``history``,
``history_config_map``). ``endpoint`` runs it all on an event loop and a thread of its own; ``settings`` holds
the flags' values. The HTTP handling, the TLS credentials' issue and the rate limits are
``kubetrain.progress``'s.
"""
