"""The Jobs view (``kubetrain dashboard``): a small aiohttp server and its static page, showing the jobs of
the kubeconfig's cluster and of this machine's local runs, live.

It reads and acts only through the SDK (``TrainingClient`` and its backends' watch): no Kubernetes client of
its own. ``server`` is the web application, ``sources`` holds one watch per backend and fans its changes out
to every open page, ``access`` decides who may see and do what (in-cluster: a trusted identity header and a
SubjectAccessReview per request), ``static/`` is the page itself (plain HTML, CSS and JavaScript modules)."""
