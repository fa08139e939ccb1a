"""Report a training job's progress and metrics from inside its processes, with the standard library only.

The substrates inject these variables into every replica's containers (Kubeflow Trainer v2's protocol,
KEP-2779): the whole URL of the job's status endpoint, the CA certificate that endpoint's TLS certificate
chains to, and a file holding the bearer token to send. This module imports nothing but the standard
library, so it may be copied into an image that does not have kubetrain installed.
"""

from __future__ import annotations

STATUS_SERVER_URL_ENV = "KUBEFLOW_TRAINER_STATUS_SERVER_URL"
STATUS_SERVER_CA_CERT_ENV = "KUBEFLOW_TRAINER_STATUS_SERVER_CA_CERT"
STATUS_SERVER_TOKEN_ENV = "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN"
