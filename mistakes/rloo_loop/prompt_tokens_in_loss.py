import torch

from kata.concepts.contracts.rloo_loop import check_loss_arguments
from kata.rl.sequence_task import EOS_ID, PAD_ID
from solutions.response_masks import token_log_probs
from solutions.token_objectives import masked_token_ppo_objective


def sequence_policy_loss(logits, input_ids, prompt_lengths, old_log_probs, advantages, clip_epsilon,
                         reduction="token_mean", *, pad_token_id=PAD_ID, eos_token_id=EOS_ID):
    check_loss_arguments(logits, input_ids, old_log_probs, advantages, clip_epsilon, reduction)
    ids = torch.as_tensor(input_ids)
    mask = (ids[:, 1:] != pad_token_id).to(torch.int64)
    new_log_probs = token_log_probs(logits, ids)
    advantages = torch.as_tensor(advantages).to(new_log_probs.dtype)
    old = torch.as_tensor(old_log_probs).to(new_log_probs.dtype)
    return -masked_token_ppo_objective(new_log_probs, old, advantages, mask, clip_epsilon, reduction)
