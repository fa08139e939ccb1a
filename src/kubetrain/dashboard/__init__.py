"""The Jobs view (``kubetrain dashboard``): a small aiohttp server and its static page, showing the jobs of
the kubeconfig's cluster and of this machine's local runs, live.

It reads and acts only through the SDK (``TrainingClient`` and its backends' watch): no Kubernetes client of
its own. ``sources`` holds one watch per backend and fans its changes out to every open page; ``server`` is
the web application (its guards and handlers), ``streams`` its Server-Sent Events; ``views`` turns jobs,
pods and events into what the page shows, with the CLI's cells (``sdk.tables``); ``access`` decides who may
see and do what (in-cluster: a trusted identity header and a SubjectAccessReview per request); ``app`` puts
them together and runs them until Ctrl-C. ``static/`` is the page: plain HTML, CSS and JavaScript modules."""
