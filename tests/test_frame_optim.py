"""The loops' Adam against torch.optim.Adam, step for step."""

from __future__ import annotations

import pytest
import torch

from kata.optim import Adam

pytestmark = pytest.mark.frame


def test_matches_torch_adam_step_for_step_with_an_annealed_rate():
    generator = torch.Generator().manual_seed(0)
    ours_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    theirs_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    theirs_model.load_state_dict(ours_model.state_dict())
    ours = Adam(ours_model.parameters(), lr=3e-3, eps=1e-5)
    theirs = torch.optim.Adam(theirs_model.parameters(), lr=3e-3, eps=1e-5)
    for step in range(25):
        inputs = torch.randn(16, 4, generator=generator, dtype=torch.float64)
        for model, optimizer in ((ours_model, ours), (theirs_model, theirs)):
            for group in optimizer.param_groups:
                group["lr"] = 3e-3 * (1 - step / 25)
            optimizer.zero_grad()
            model(inputs).pow(2).sum().backward()
            optimizer.step()
    for mine, reference in zip(ours_model.parameters(), theirs_model.parameters()):
        torch.testing.assert_close(mine, reference, rtol=1e-12, atol=1e-14)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="lr"):
        Adam(torch.nn.Linear(2, 2).parameters(), lr=0.0)
    with pytest.raises(ValueError, match="parameters"):
        Adam([], lr=1e-3)
