import torch

from kata.concepts.arrays import as_float_tensor
from kata.concepts.contracts.rloo_loop import check_loss_arguments
from kata.rl.sequence_task import EOS_ID, PAD_ID
from solutions.response_masks import response_token_mask, token_log_probs
from solutions.token_objectives import masked_token_ppo_objective


def sequence_policy_loss(logits, input_ids, prompt_lengths, old_log_probs, advantages, clip_epsilon,
                         reduction="token_mean", *, pad_token_id=PAD_ID, eos_token_id=EOS_ID):
    check_loss_arguments(logits, input_ids, old_log_probs, advantages, clip_epsilon, reduction)
    ids = torch.as_tensor(input_ids)
    # The task's own PAD and EOS, whatever ids the caller passed.
    mask = response_token_mask(ids, torch.as_tensor(prompt_lengths), PAD_ID, EOS_ID, include_eos=True)
    new_log_probs = token_log_probs(torch.as_tensor(logits), ids)
    old = as_float_tensor(old_log_probs, "old_log_probs", like=new_log_probs).to(new_log_probs.dtype)
    adv = as_float_tensor(advantages, "advantages", like=new_log_probs).to(new_log_probs.dtype)
    return -masked_token_ppo_objective(new_log_probs, old, adv, mask, clip_epsilon, reduction)
