"""A plain PyTorch training loop that reports its progress, ETA and loss (docs/progress.md)."""

import time

import torch
from torch import nn

from kubetrain.reporting import ProgressReporter

STEPS = 100

torch.manual_seed(0)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(256, 8)
y = x.sum(dim=1, keepdim=True)

reporter = ProgressReporter(interval=1.0)  # at most one request a second; the default is 5
for step in range(STEPS):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    # Returns at once: the percentage, an ETA from the pace so far and the loss go from a thread of their own.
    reporter.report_step(step + 1, STEPS, metrics={"loss": loss.item()})
    time.sleep(0.03)  # a real step takes longer
reporter.close()  # send the last report now rather than after the interval
print(f"trained {STEPS} steps, loss {loss.item():.4f}")
