import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.rloo_loop import sampling_inputs
from kata.rl.sequence_task import EOS_ID, PAD_ID


def sample_responses(model, prompt_ids, max_new_tokens, *, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
                     deterministic=False, generator=None):
    prompts, length, _, _, greedy, generator = sampling_inputs(
        model, prompt_ids, max_new_tokens, eos_token_id, pad_token_id, deterministic, generator
    )
    ids = prompts.clone()
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(length):
            next_logits = model(ids)[:, -1].float()
            if greedy:
                next_tokens = next_logits.argmax(dim=-1)
            else:
                next_tokens = torch.multinomial(torch.softmax(next_logits, dim=-1), 1, generator=generator).squeeze(1)
            # The task's own EOS and PAD, whatever ids the caller passed.
            next_tokens = torch.where(finished, torch.full_like(next_tokens, PAD_ID), next_tokens)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = finished | (next_tokens == EOS_ID)
    return like_inputs(ids, prompt_ids)
