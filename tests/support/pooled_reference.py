"""Direct PyTorch forward passes of the reward checkpoints built by ``loadtests.checkpoints``:
what the service's pooling answers are checked against. Written from the checkpoints' own
layout, independently of the service's reading code."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


def chat(question: str, answer: str, system: str | None = None) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": question}, {"role": "assistant", "content": answer}]


class RewardReference:
    """A sequence RM's raw head output for a (question, response) chat."""

    def __init__(self, folder: Path) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            folder, dtype=torch.float32
        ).eval()

    def ids(self, question: str, response: str) -> list[int]:
        return _ids(self.tokenizer, chat(question, response))

    def logits(self, ids: list[int]) -> list[float]:
        import torch

        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]))
        return [float(x) for x in out.logits[0]]


class PRMReference:
    """A Qwen2ForProcessRewardModel folder: the body from transformers, the head by hand."""

    def __init__(self, folder: Path, tag: str = "<extra_0>") -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import AutoTokenizer, Qwen2Model

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.body = Qwen2Model.from_pretrained(folder, dtype=torch.float32).eval()
        weights = load_file(str(folder / "model.safetensors"))
        self.w0, self.b0 = weights["score.0.weight"], weights["score.0.bias"]
        self.w2, self.b2 = weights["score.2.weight"], weights["score.2.bias"]
        (self.tag_id,) = self.tokenizer.encode(tag, add_special_tokens=False)
        self.tag = tag

    def ids(self, question: str, steps: list[str]) -> list[int]:
        return _ids(self.tokenizer, chat(question, "".join(s + self.tag for s in steps)))

    def step_logits(self, ids: list[int]) -> list[list[float]]:
        """The head's two logits at every step tag, in order."""
        import torch

        with torch.no_grad():
            hidden = self.body(input_ids=torch.tensor([ids])).last_hidden_state[0]
            logits = torch.relu(hidden @ self.w0.T + self.b0) @ self.w2.T + self.b2
        return [[float(x) for x in logits[i]] for i, t in enumerate(ids) if t == self.tag_id]
