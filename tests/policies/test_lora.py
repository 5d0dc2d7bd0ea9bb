"""LoRA targets: every name must match a module, else a ConfigError naming it (peft alone accepts a
list where one name matches and leaves the rest of the model without adapters)."""

from __future__ import annotations

import pytest
from torch import nn

from vla_rl.config import ConfigError
from vla_rl.policies.lora import LoraSettings, apply_lora, check_lora_targets


class TwoBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.ModuleDict({"q_proj": nn.Linear(4, 4)}) for _ in range(2))
        self.head = nn.Linear(4, 2)
        self.norm = nn.LayerNorm(4)


def test_matching_targets_pass_and_get_adapters() -> None:
    model = apply_lora(TwoBlocks(), LoraSettings(rank=2), default_targets=["q_proj", "head"])
    adapted = {name for name, _ in model.named_modules() if name.endswith("lora_A")}
    assert len(adapted) == 3  # blocks.0.q_proj, blocks.1.q_proj, head


def test_a_name_matching_no_module_is_named_with_the_linear_layers() -> None:
    # peft itself would accept this list (q_proj matches) and silently skip lm_head
    with pytest.raises(ConfigError, match=r"policy.lora.target_modules: \['lm_head'\].*\['head', 'q_proj'\]"):
        apply_lora(TwoBlocks(), LoraSettings(target_modules=["q_proj", "lm_head"]), ["head"])


def test_a_suffix_is_not_a_partial_name() -> None:
    # "proj" is not a module name: "q_proj" ends in "proj" but not in ".proj"
    with pytest.raises(ConfigError, match=r"\['proj'\]"):
        check_lora_targets(TwoBlocks(), ["proj"])
    check_lora_targets(TwoBlocks(), ["blocks.0.q_proj", "norm"])
