import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import response_mask_inputs


def response_token_mask(input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos):
    ids, lengths, pad, eos, keep_eos = response_mask_inputs(
        input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos
    )
    positions = torch.arange(ids.shape[1])
    after_prompt = positions >= lengths[:, None]
    is_eos = (ids == eos) & after_prompt
    first_eos = is_eos.to(torch.int8).argmax(dim=1)
    last_real = torch.where((ids != pad) & after_prompt, positions, -1).amax(dim=1)
    last = torch.where(is_eos.any(dim=1), first_eos - (0 if keep_eos else 1), last_real)
    in_response = after_prompt & (positions <= last[:, None])
    if pad == eos:
        in_response &= ids != pad  # stripping the padding id strips the EOS too
    return like_inputs(in_response[:, 1:].to(torch.int64), input_ids, prompt_lengths)
