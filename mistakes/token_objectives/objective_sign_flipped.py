from solutions.token_objectives import masked_token_ppo_objective as reference


def masked_token_ppo_objective(new_log_probs, old_log_probs, advantages, mask, clip_epsilon, reduction):
    return -reference(new_log_probs, old_log_probs, advantages, mask, clip_epsilon, reduction)
