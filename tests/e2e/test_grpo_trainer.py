"""TRL's own GRPOTrainer trains the default model for two steps on CPU with the verifier as its
only reward, each completion verified against its GSM8K answer (a dataset column), and the
rewards it logged are the service's answers for the same completions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import verifier_client as vc
from verifier_client.trl import reward_function

from service.evals.data import load_gsm8k_solutions
from service.scoring.answers import reference_answer

# TRL warns at import that it was tested with older vLLM releases (the service's engine, not
# the trainer's: this run generates with transformers), and vLLM's import reaches a deprecated
# torch.jit API; neither is this test's subject.
pytestmark = [
    pytest.mark.filterwarnings("ignore:TRL currently supports vLLM versions:UserWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.timeout(900),
]

PROMPTS = 2
GENERATIONS = 4  # completions per prompt, as a GRPO group


def test_grpo_trainer_logs_the_services_rewards(
    server: Any, model_dir: Path, data_dir: Path, tmp_path: Path
) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    items = load_gsm8k_solutions(data_dir / "gsm8k" / "example_model_solutions.jsonl", PROMPTS)
    answers = {}
    rows = []
    for item in items:
        answer = reference_answer(item.ground_truth)
        assert answer is not None
        prompt = f"{item.question}\nEnd with 'The answer is N.'"
        answers[prompt] = answer
        rows.append({"prompt": prompt, "answer": answer})
    reward = reward_function(server.url, reference_column="answer", timeout_s=300)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        per_device_train_batch_size=PROMPTS * GENERATIONS,
        num_generations=GENERATIONS,
        max_completion_length=24,
        max_steps=2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_vllm=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
    )
    trainer.train()

    steps = [h for h in trainer.state.log_history if "rewards/verifier_reward/mean" in h]
    assert len(steps) == 2
    # The last generation batch, in the order the reward function saw it.
    logged = list(trainer._logs["rewards"]["verifier_reward"])
    prompts = list(trainer._logs["prompt"])
    completions = list(trainer._logs["completion"])
    assert len(logged) == len(completions) == PROMPTS * GENERATIONS
    with vc.Client(server.url) as client:
        expected = []
        for prompt, completion in zip(prompts, completions, strict=True):
            if not completion.strip():
                expected.append(0.0)  # the hook's rule: an empty completion earns 0
                continue
            out = client.outcome(question=prompt, response=completion, reference=answers[prompt])
            assert out.score is not None
            expected.append(out.score)
    # TRL keeps rewards as float32
    assert logged == pytest.approx(expected, abs=1e-6)
    # who decided went to the trainer's metrics and completions table
    assert all("verifier_decided_by_rule" in h for h in steps)
    extra = trainer._logs["extra"]
    assert len(extra["verifier_decided_by_rule"]) == len(logged)
