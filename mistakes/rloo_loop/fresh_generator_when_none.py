import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.rloo_loop import sampling_inputs
from kata.rl.sequence_task import EOS_ID, PAD_ID


def sample_responses(model, prompt_ids, max_new_tokens, *, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
                     deterministic=False, generator=None):
    prompts, length, eos, pad, greedy, generator = sampling_inputs(
        model, prompt_ids, max_new_tokens, eos_token_id, pad_token_id, deterministic, generator
    )
    if generator is None:
        generator = torch.Generator()  # a new generator, in the same state at every call: not torch's global one
    ids = prompts.clone()
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(length):
            next_logits = model(ids)[:, -1].float()
            if greedy:
                next_tokens = next_logits.argmax(dim=-1)
            else:
                next_tokens = torch.multinomial(torch.softmax(next_logits, dim=-1), 1, generator=generator).squeeze(1)
            next_tokens = torch.where(finished, torch.full_like(next_tokens, pad), next_tokens)
            ids = torch.cat([ids, next_tokens[:, None]], dim=1)
            finished = finished | (next_tokens == eos)
    return like_inputs(ids, prompt_ids)
