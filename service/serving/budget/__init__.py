"""Token budgets: estimate what a request will cost before it runs, and plan around a limit.

Pure: no I/O, no engine, no tokenizer. The estimate follows the engine calls each endpoint
makes (see ``service/serving``):

- direct judgment: 1 call, the prompt plus 1 generated token (the verdict slot);
- reasoning judgment, per sample: a rationale call (the prompt, up to ``reasoning_tokens``
  generated) then a verdict call (prompt + rationale as prompt, 1 generated);
- process, direct/reasoning: one judgment per step k on a prompt holding steps 1..k;
- process, single_pass: one prefill of the whole conversation, 1 generated;
- model split: one copy call (the response as prompt, about 1.25x the response generated);
- decision: one label read per question and cyclic order, each on the input plus that
  question; in reasoning mode a thought call before each read, per sample;
- compare: one letter read per order shown (pairwise: every pair, in both orders by default;
  listwise: every cyclic order by default), each on the question and the responses shown; with
  reasoning_tokens a written comparison before each read, per sample.

Layout: ``text`` (text -> tokens, the prompts' fixed overheads), ``estimates`` (one
estimator per job kind), ``policy`` (refuse or degrade over ``max_eval_tokens``).

It is an upper-ish bound for realistic text, not a guarantee: operators reconcile quotas with
the ``actual`` usage recorded after the run (``service.stores.auth.settle``).

Example:
    >>> from service.protocol import OutcomeRequest
    >>> req = OutcomeRequest(question="What is 2+2?", response="4")
    >>> estimate("outcome", req)
    Estimate(total=169, prompt=168, generated=1, calls=1)
"""

from __future__ import annotations

from service.serving.budget.estimates import ESTIMATORS, ZERO, Estimate, estimate
from service.serving.budget.policy import BudgetPlan, plan
from service.serving.budget.text import estimate_text_tokens, split_copy_tokens

__all__ = [
    "ESTIMATORS",
    "ZERO",
    "BudgetPlan",
    "Estimate",
    "estimate",
    "estimate_text_tokens",
    "plan",
    "split_copy_tokens",
]
