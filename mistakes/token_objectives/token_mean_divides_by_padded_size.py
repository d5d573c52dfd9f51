from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import check_reduction, token_ppo_inputs
from solutions.token_objectives import masked_token_ppo_terms


def masked_token_ppo_objective(new_log_probs, old_log_probs, advantages, mask, clip_epsilon, reduction):
    check_reduction(reduction)
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    pessimistic = masked_token_ppo_terms(new, old, adv, bool_mask, epsilon)[3]
    lengths = bool_mask.sum(dim=1).to(pessimistic.dtype)
    row_sums = pessimistic.sum(dim=1)
    if reduction == "token_mean":
        value = pessimistic.mean()  # every padded position counts
    elif reduction == "sequence_mean":
        value = (row_sums / lengths.clamp(min=1.0)).mean()
    else:
        value = row_sums.mean()
    return like_inputs(value, new_log_probs, old_log_probs, advantages, mask)
