import torch

from kata.concepts.arrays import to_numpy
from kata.concepts.contracts.rloo_loop import check_iteration_arguments
from kata.rl.rloo import IterationResult
from kata.rl.sequence_task import EOS_ID, PAD_ID
from solutions.response_masks import response_token_mask, token_log_probs
from solutions.rloo_loop import group_rloo_advantages, sequence_policy_loss


def rloo_iteration(model, optimizer, input_ids, prompt_lengths, rewards, group_size, ppo_epochs, clip_epsilon,
                   reduction="token_mean", *, pad_token_id=PAD_ID, eos_token_id=EOS_ID):
    check_iteration_arguments(model, optimizer, input_ids, prompt_lengths, rewards, group_size, ppo_epochs)
    ids = torch.as_tensor(input_ids).to(torch.int64)
    lengths = torch.as_tensor(prompt_lengths).to(torch.int64)
    advantages = torch.as_tensor(group_rloo_advantages(to_numpy(rewards).astype("float64"), group_size))
    mask = response_token_mask(ids, lengths, pad_token_id, eos_token_id, include_eos=True)
    with torch.no_grad():
        old_log_probs = token_log_probs(model(ids), ids)
    losses = []
    for _ in range(ppo_epochs):
        # reduction, pad_token_id and eos_token_id are not passed on: the loss uses its defaults.
        loss = sequence_policy_loss(model(ids), ids, lengths, old_log_probs, advantages, clip_epsilon)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return IterationResult(advantages=advantages.numpy(), response_mask=mask, old_log_probs=old_log_probs,
                           epoch_losses=tuple(losses))
