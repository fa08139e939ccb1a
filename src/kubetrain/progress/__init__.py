"""The status endpoint both substrates serve: training processes POST their progress and metrics to it.

Kubeflow Trainer v2's protocol (KEP-2779): over HTTPS, with a bearer token,
``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status`` and ``{"trainerStatus": {...}}``.
Here are the parts the operator and the local runner share: the HTTP handling (``server``), the TLS
credentials (``credentials``) and the rate limits (``limits``). How a token is checked and where an accepted
report goes are each substrate's own.
"""
