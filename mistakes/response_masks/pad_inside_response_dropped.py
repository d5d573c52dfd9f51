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
    first_eos = torch.where(is_eos.any(dim=1), is_eos.to(torch.int8).argmax(dim=1), ids.shape[1])
    before_end = (positions < first_eos[:, None]) | ((positions == first_eos[:, None]) & keep_eos)
    real = (ids != pad) | (ids == eos)  # every pad id is taken for padding, even one inside the response
    in_response = after_prompt & real & before_end
    return like_inputs(in_response[:, 1:].to(torch.int64), input_ids, prompt_lengths)
