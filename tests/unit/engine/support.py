"""Shorthands for driving ``reconcile`` in tests."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import Action, Decision, EmitEvent, Observation, Traits

from .fakes import FRAMEWORK, NOW

KUBE = Traits(colocated=False)
LOCAL = Traits(colocated=True)

A = TypeVar("A")
J = TypeVar("J", bound=TrainingJob)


def decide(
    job: TrainingJob,
    observation: Observation | None = None,
    now: datetime = NOW,
    traits: Traits = KUBE,
) -> Decision:
    return reconcile(job, observation or Observation(services=frozenset()), now, traits, framework=FRAMEWORK)


def actions_of(decision: Decision, type_: type[A]) -> list[A]:
    return [action for action in decision.actions if isinstance(action, type_)]


def only_state_actions(decision: Decision) -> list[Action]:
    """Every action except events."""
    return [action for action in decision.actions if not isinstance(action, EmitEvent)]


def event_reasons(decision: Decision) -> list[str]:
    return [event.reason for event in actions_of(decision, EmitEvent)]


def settled(job: J, observation: Observation, now: datetime = NOW) -> J:
    """The job with the status a reconcile of ``observation`` at ``now`` gives it."""
    return job.with_status(decide(job, observation, now).status)
