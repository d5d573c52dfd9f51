"""The loops' optimizers and thread setting: Adam against torch.optim.Adam and the textbook update."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kata.rl import Adam, torch_threads
from kata.testing.sgd import SGD

pytestmark = pytest.mark.frame


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torch_adam_bit_for_bit_with_an_annealed_rate(dtype):
    # The loops' seeds were tuned with torch.optim.Adam(fused=True)'s arithmetic: the same bits, not close ones.
    generator = torch.Generator().manual_seed(0)
    ours_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(dtype)
    theirs_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(dtype)
    theirs_model.load_state_dict(ours_model.state_dict())
    ours = Adam(ours_model.parameters(), lr=3e-3, eps=1e-5)
    theirs = torch.optim.Adam(theirs_model.parameters(), lr=3e-3, eps=1e-5, fused=True)
    for step in range(25):
        inputs = torch.randn(16, 4, generator=generator, dtype=dtype)
        for model, optimizer in ((ours_model, ours), (theirs_model, theirs)):
            for group in optimizer.param_groups:
                group["lr"] = 3e-3 * (1 - step / 25)
            optimizer.zero_grad()
            if step % 5 == 4:  # a step where one parameter has no gradient: it and its state stay as they are
                model[2](torch.tanh(model[0](inputs).detach())).pow(2).sum().backward()
            else:
                model(inputs).pow(2).sum().backward()
            optimizer.step()
    for mine, reference in zip(ours_model.parameters(), theirs_model.parameters()):
        np.testing.assert_array_equal(mine.detach().numpy(), reference.detach().numpy(),
                                      err_msg="Adam must be torch.optim.Adam(fused=True)'s update bit for bit")


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="lr"):
        Adam(torch.nn.Linear(2, 2).parameters(), lr=0.0)
    with pytest.raises(ValueError, match="parameters"):
        Adam([], lr=1e-3)


@given(seed=st.integers(0, 1000), lr=st.floats(1e-4, 0.1))
def test_adam_follows_the_textbook_update(seed, lr):
    generator = torch.Generator().manual_seed(seed)
    parameter = torch.nn.Parameter(torch.randn(5, generator=generator, dtype=torch.float64))
    optimizer = Adam([parameter], lr=lr)
    expected = parameter.detach().clone()
    first, second = torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    for step in range(1, 4):
        gradient = torch.randn(5, generator=generator, dtype=torch.float64)
        optimizer.zero_grad()
        parameter.grad = gradient.clone()
        optimizer.step()
        first = 0.9 * first + 0.1 * gradient
        second = 0.999 * second + 0.001 * gradient**2
        expected = expected - lr * (first / (1 - 0.9**step)) / ((second / (1 - 0.999**step)).sqrt() + 1e-8)
        np.testing.assert_allclose(parameter.detach(), expected, rtol=1e-10, atol=1e-12,
                                   err_msg="each step of the Adam matches the textbook update with bias correction")


def test_sgd_takes_a_plain_gradient_step():
    parameter = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    optimizer = SGD([parameter], lr=0.5)
    parameter.grad = torch.tensor([0.2, 0.4], dtype=torch.float64)
    optimizer.step()
    np.testing.assert_array_equal(parameter.detach().numpy(), [0.9, -2.2],
                                  err_msg="SGD subtracts lr times the gradient: 1 - 0.5 * 0.2 and -2 - 0.5 * 0.4")


def test_torch_threads_sets_and_restores_the_thread_count():
    before = torch.get_num_threads()
    other = 2 if before == 1 else 1
    with torch_threads(other):
        assert torch.get_num_threads() == other, (
            f"torch_threads({other}) sets the thread count inside the block: {torch.get_num_threads()}")
    assert torch.get_num_threads() == before, (
        f"torch_threads restores the thread count {before} on exit: {torch.get_num_threads()}")
    with torch_threads(None):
        assert torch.get_num_threads() == before, (
            f"torch_threads(None) leaves the thread count {before} as it is: {torch.get_num_threads()}")
