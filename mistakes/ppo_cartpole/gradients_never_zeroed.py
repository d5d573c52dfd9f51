from __future__ import annotations

import torch


def _clipped_step(optimizer, parameters, loss, max_grad_norm):
    loss.backward()  # no zero_grad(): every step adds its gradient to all the earlier ones
    grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    optimizer.step()
    return grad_norm
