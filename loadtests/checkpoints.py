"""Small reward-model checkpoints built here, for tests, benchmarks and the docs' examples.

No trained RM or PRM can be downloaded on these machines, so these are built from configs
with transformers, with the default model's tokenizer, and served by vLLM's pooling runner
like any real one:

- ``reward``: a ``LlamaForSequenceClassification`` (a one-logit Bradley-Terry head, as
  Skywork-Reward-V2), random weights.
- ``prm``: a ``Qwen2ForProcessRewardModel`` folder (Qwen2.5-Math-PRM's layout: a Qwen2 body,
  ``score = Linear, ReLU, Linear(2)``, the step tag ``<extra_0>`` added to the tokenizer).
  Its first layer is planted: attention is uniform, so a step tag sees the mean of every token
  before it, and one "poison" token carries a feature the head reads as "bad". Every step tag
  after the poison word scores low, every one before it high; the second layer is random (and
  small), so the forward pass is still a real one. ``planted.json`` names the word.

Usage: ``python -m loadtests.checkpoints reward|prm OUT_DIR [--layers N]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PRM_TAG = "<extra_0>"
POISON_WORD = " zebra"  # one token for the default tokenizer; the builder checks it
_SEED = 1234


def _base_dir() -> Path:
    from service.config import Settings
    from service.engine.models import prepare_default_model

    return prepare_default_model(Settings())


def build_reward(out: Path, layers: int = 2, num_labels: int = 1) -> Path:
    """A random-weight LlamaForSequenceClassification with the default model's tokenizer."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    # transformers' classes are untyped; Any keeps the strict checks on this module's own code
    classifier: Any = transformers.LlamaForSequenceClassification

    base = _base_dir()
    config: Any = AutoConfig.from_pretrained(base)
    config.num_hidden_layers = layers
    config.num_labels = num_labels
    config.architectures = ["LlamaForSequenceClassification"]
    # No pad token: the sequence's score is its last token's, as vLLM's LAST pooling reads it.
    config.pad_token_id = None
    config.tie_word_embeddings = False
    torch.manual_seed(_SEED)
    model = classifier(config).float()
    with torch.no_grad():  # a head of typical scale, so rewards spread over a few units
        model.score.weight.normal_(0.0, config.hidden_size**-0.5)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return out


def build_prm(out: Path, layers: int = 2) -> Path:
    """A Qwen2ForProcessRewardModel folder whose head scores steps after POISON_WORD low."""
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer

    qwen2_config: Any = transformers.Qwen2Config
    qwen2_model: Any = transformers.Qwen2Model

    base = _base_dir()
    tok = AutoTokenizer.from_pretrained(base)
    tok.add_special_tokens({"additional_special_tokens": [PRM_TAG]})
    poison = tok.encode(POISON_WORD, add_special_tokens=False)
    if len(poison) != 1:
        raise ValueError(f"{POISON_WORD!r} is {len(poison)} tokens for this tokenizer")
    llama: Any = AutoConfig.from_pretrained(base)
    config = qwen2_config(
        vocab_size=len(tok),
        hidden_size=llama.hidden_size,
        intermediate_size=llama.intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=llama.num_attention_heads,
        num_key_value_heads=llama.num_key_value_heads,
        max_position_embeddings=llama.max_position_embeddings,
        rms_norm_eps=llama.rms_norm_eps,
        rope_theta=100000.0,
        tie_word_embeddings=False,
        bos_token_id=llama.bos_token_id,
        eos_token_id=llama.eos_token_id,
        num_labels=2,
        architectures=["Qwen2ForProcessRewardModel"],
    )
    torch.manual_seed(_SEED)
    body = qwen2_model(config).float()
    hidden = config.hidden_size
    feature = 0  # the residual dimension that carries "the poison word came before"
    with torch.no_grad():
        emb = body.embed_tokens.weight
        emb[:, feature] = 0.0
        emb[poison[0], feature] = 50.0
        first = body.layers[0]
        attn = first.self_attn
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()  # q.k = 0 everywhere: uniform causal attention
            proj.bias.zero_()
        attn.v_proj.weight.zero_()
        attn.v_proj.bias.zero_()
        attn.v_proj.weight[0, feature] = 1.0  # kv head 0, dim 0 reads the feature
        attn.o_proj.weight.zero_()
        attn.o_proj.weight[feature, 0] = 1.0  # query head 0 (kv head 0), dim 0 writes it back
        first.mlp.down_proj.weight.zero_()
        for layer in body.layers[1:]:  # real but small: they must not drown the feature
            for p in layer.parameters():
                if p.dim() == 2:
                    p.mul_(0.05)
            layer.self_attn.o_proj.weight[feature].zero_()
            layer.mlp.down_proj.weight[feature].zero_()
        body.norm.weight.fill_(1.0)
        score0 = torch.nn.Linear(hidden, hidden)
        score2 = torch.nn.Linear(hidden, 2)
        score0.weight.normal_(0.0, 0.02)
        score0.weight[0].zero_()
        score0.weight[0, feature] = 1.0
        score0.bias.zero_()
        score2.weight.normal_(0.0, 0.01)
        score2.weight[:, 0] = torch.tensor([1.0, -1.0])  # the feature raises "bad" (class 0)
        score2.bias.copy_(torch.tensor([0.0, 2.0]))  # no feature: log-odds about +2
    state = {f"model.{k}": v.contiguous() for k, v in body.state_dict().items()}
    state.update(
        {
            "score.0.weight": score0.weight.detach().clone(),
            "score.0.bias": score0.bias.detach().clone(),
            "score.2.weight": score2.weight.detach().clone(),
            "score.2.bias": score2.bias.detach().clone(),
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "planted.json").write_text(
        json.dumps({"poison_word": POISON_WORD, "poison_id": poison[0], "step_tag": PRM_TAG})
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["reward", "prm"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    build = build_reward if args.kind == "reward" else build_prm
    print(build(args.out, layers=args.layers))


if __name__ == "__main__":
    main()
