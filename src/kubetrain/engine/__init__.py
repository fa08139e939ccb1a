"""The pure job engine: observed replicas and a clock in, a Decision out. No I/O.

Public entry points (substrates and the CLI code against these names):

- ``engine.admission.admit(job)``: the framework's defaults applied and validated, or
  ``InvalidJobError`` listing every bad field;
- ``engine.reconciler.reconcile(job, observation, now, traits)``: the complete ``Decision``
  (actions, new status, ``requeue_after``) for one job;
- ``engine.planning.plan_replica(job, type, index, addressing)`` and ``desired_replicas``: what each
  replica is (name, labels, pod template with injected env, restart policy);
- ``engine.conditions.update_conditions``: the condition state machine.
"""
