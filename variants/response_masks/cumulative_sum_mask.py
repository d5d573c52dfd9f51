from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import response_mask_inputs


def response_token_mask(input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos):
    ids, lengths, pad, eos, keep_eos = response_mask_inputs(
        input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos
    )
    positions = torch.arange(ids.shape[1], device=ids.device)
    response_part = positions[None, :] >= lengths[:, None]
    is_eos = ((ids == eos) & response_part).to(torch.int64)
    eos_seen_before = torch.cumsum(is_eos, dim=1) - is_eos
    has_eos = is_eos.sum(dim=1, keepdim=True) > 0
    real = ((ids != pad) & response_part).to(torch.int64)
    real_to_come = torch.flip(torch.cumsum(torch.flip(real, [1]), dim=1), [1]) > 0
    upto_eos = (eos_seen_before == 0) & ((is_eos == 0) | keep_eos)
    in_response = response_part & torch.where(has_eos, upto_eos, real_to_come)
    return like_inputs(in_response[:, 1:].to(torch.int64), input_ids, prompt_lengths)
