"""TensorFlow MultiWorkerMirroredStrategy on CPU: 2 workers, a tiny linear model, a custom loop.

A TFJob injects TF_CONFIG (the cluster of every replica's host:port and this replica's task); the
strategy reads it and all-reduces gradients between the workers over gRPC. A custom loop and
``strategy.reduce`` keep the example independent of Keras-version differences in ``model.fit``.
"""

from __future__ import annotations

import json
import os
import sys

import tensorflow as tf

STEPS = 30


def main() -> int:
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    workers = strategy.num_replicas_in_sync
    print(f"task {task['type']}-{task['index']}: {workers} replicas in sync")

    ones = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
    print(f"all-reduce of ones = {float(ones):g}")

    with strategy.scope():
        weights = tf.Variable(tf.zeros([4, 1]))
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)

    truth = tf.constant([[1.0], [-2.0], [0.5], [3.0]])
    rng = tf.random.Generator.from_seed(10 + int(task["index"]))
    features = rng.normal([64, 4])
    labels = features @ truth

    @tf.function  # type: ignore[untyped-decorator]  # tensorflow is untyped
    def step() -> tf.Tensor:
        def replica_step() -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((features @ weights - labels) ** 2)
            optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(replica_step), axis=None)

    losses = [float(step()) for _ in range(STEPS)]
    print(f"loss first {losses[0]:.4f} last {losses[-1]:.4f}")
    return 0 if float(ones) == workers and losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
