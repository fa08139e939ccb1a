"""The fault suite: a burst of jobs on envtest while the operator, its leader election and the control plane
are made to fail, and what must hold afterwards.

Each scenario (``scenarios.py``) applies N PyTorchJobs (1 master + 3 workers) at once to a namespace of a
private envtest whose API server keeps an audit log, runs the operator as real processes at its shipped
defaults, plays the kubelet for every pod the scheduler binds (``kubelet.py``), injects its fault at random
points of the burst, and then checks, from the API server's own records:

- every job has exactly its 4 pods and 4 services, each created once (the audit log's successful creates)
  and none deleted, and every job reaches Running;
- with leader election, every write of the operator's own (children, statuses, Events, deletions) was
  received while the replica that sent it held the Lease (``audit_checks.py``);
- how long the operator took to act again after the fault and to bring every job to Running.

``tests/faults`` runs it at a size CI affords; ``bench/faults_under_load.py`` at full size (500 jobs),
printing the table of docs/operations.md's "Reliability" section.
"""
