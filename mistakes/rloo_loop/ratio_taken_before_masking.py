import torch

from kata.concepts.arrays import as_float_tensor
from kata.concepts.contracts.rloo_loop import check_loss_arguments
from kata.rl.sequence_task import EOS_ID, PAD_ID
from solutions.response_masks import response_token_mask, token_log_probs


def sequence_policy_loss(logits, input_ids, prompt_lengths, old_log_probs, advantages, clip_epsilon,
                         reduction="token_mean", *, pad_token_id=PAD_ID, eos_token_id=EOS_ID):
    check_loss_arguments(logits, input_ids, old_log_probs, advantages, clip_epsilon, reduction)
    ids = torch.as_tensor(input_ids)
    mask = response_token_mask(ids, torch.as_tensor(prompt_lengths), pad_token_id, eos_token_id, include_eos=True)
    new = token_log_probs(torch.as_tensor(logits), ids)
    old = as_float_tensor(old_log_probs, "old_log_probs", like=new).to(new.dtype)
    adv = as_float_tensor(advantages, "advantages", like=new).to(new.dtype)[:, None]
    # Every position's ratio and surrogate, then the mask multiplied in: 0 * NaN is NaN where old is inf or NaN.
    ratio = torch.exp(new - old)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_epsilon, 1 + clip_epsilon) * adv) * mask
    lengths = mask.sum(dim=1).to(new.dtype)
    if reduction == "token_mean":
        objective = surrogate.sum() / lengths.sum().clamp(min=1.0)
    elif reduction == "sequence_mean":
        objective = (surrogate.sum(dim=1) / lengths.clamp(min=1.0)).mean()
    else:
        objective = surrogate.sum(dim=1).mean()
    return -objective
