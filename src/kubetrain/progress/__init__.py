"""The status endpoint both substrates serve: training processes POST their progress and metrics to it.

Kubeflow Trainer v2.3's protocol (KEP-2779): over HTTPS, with a bearer token,
``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status`` and ``{"trainerStatus": {...}}``,
for each kind the endpoint's routes name (``kubetrain.api.progress.StatusRoutes``; Trainer serves
``trainer.kubeflow.org/v1alpha1`` ``trainjobs`` alone). Here are the parts the operator and the local runner
share: the HTTP handling (``server``), the TLS
credentials (``credentials``) and the rate limits (``limits``). How a token is checked and where an accepted
report goes are each substrate's own.
"""
