"""Masks as people write them, for `python -m models check-mask --mask examples/my_masks.py:NAME`.

A mask is a predicate (b, h, q_idx, kv_idx) -> bool, True = may attend: FlexAttention's mask_mod, transformers'
masking_utils functions, or a BlockMask (its mask_mod is used).
"""

import torch


def sliding_window(b, h, q_idx, kv_idx):
    """FlexAttention's sliding window of 4: the query and the 3 keys before it (causal+window:3)."""
    return (kv_idx <= q_idx) & (q_idx - kv_idx < 4)


def sliding_window_off_by_one(b, h, q_idx, kv_idx):
    """The classic bug: '4 tokens back' — one key too many on every row (causal+window:4)."""
    return (kv_idx <= q_idx) & (q_idx - kv_idx <= 4)


try:  # transformers' own mask function, when transformers is installed
    from transformers.masking_utils import sliding_window_causal_mask_function

    SW = sliding_window_causal_mask_function(4)
except ImportError:
    SW = sliding_window

BLOCK = torch.nn.attention.flex_attention.create_block_mask(sliding_window, None, None, 128, 128, device="cpu")
