from __future__ import annotations

import torch


def _clipped_step(optimizer, parameters, loss, max_grad_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in parameters if p.grad is not None]
    grad_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    optimizer.step()  # max_grad_norm is never applied
    return grad_norm
