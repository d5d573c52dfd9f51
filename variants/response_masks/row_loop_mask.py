from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import response_mask_inputs


def response_token_mask(input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos):
    ids, lengths, pad, eos, keep_eos = response_mask_inputs(
        input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos
    )
    rows, length = ids.shape
    mask = torch.zeros((rows, length - 1), dtype=torch.int64, device=ids.device)
    for i in range(rows):
        row = ids[i].tolist()
        start = int(lengths[i])
        end = start  # one past the last response token
        for k in range(start, length):
            if row[k] == eos:
                end = k + 1 if keep_eos else k
                break
            if row[k] != pad:
                end = k + 1
        for k in range(start, end):
            mask[i, k - 1] = 1
    return like_inputs(mask, input_ids, prompt_lengths)
