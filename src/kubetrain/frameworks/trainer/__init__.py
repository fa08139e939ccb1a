"""Kubeflow Trainer v2 runtimes: what each ML policy, gang policy and the JobSet make of a TrainJob."""
