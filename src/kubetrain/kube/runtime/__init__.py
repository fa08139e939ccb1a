"""A small controller runtime on lightkube's async client:
work queue, cache, reflector, expectations, leader election.

Library-like: nothing here knows about training jobs. The kube substrate wires these pieces into the operator.
"""
