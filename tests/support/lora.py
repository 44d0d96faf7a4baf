"""A LoRA adapter with random weights on the default model, and its merged forward pass."""

from __future__ import annotations

from pathlib import Path

RANK = 8


def build_adapter(base: Path, out: Path, seed: int = 0) -> Path:
    """A PEFT LoRA adapter on ``base`` with random A and B (``init_lora_weights=False``: peft's
    default B of zeros would change nothing), on the attention and MLP projections."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    config = LoraConfig(
        r=RANK,
        lora_alpha=2 * RANK,
        target_modules=["q_proj", "v_proj", "down_proj"],
        init_lora_weights=False,
    )
    get_peft_model(model, config).save_pretrained(str(out))
    return out


class NextToken:
    """log p(next token) after some ids, from the base weights or with the adapter merged."""

    def __init__(self, base: Path, adapter: Path | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        self._model = model.eval()

    def logprobs(self, ids: list[int]) -> list[float]:
        import torch

        with torch.no_grad():
            logits = self._model(torch.tensor([ids])).logits[0, -1].float()
        return [float(v) for v in torch.log_softmax(logits, -1)]
