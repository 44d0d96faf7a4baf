"""Wire models of verifier-service, generated from its /openapi.json.

Do not edit: run `scripts/gen_client_models.py` (a test fails when these drift from the server).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeAliasType


class Artifact(BaseModel):
    id: Annotated[str, Field(title="Id")]
    position: Annotated[int, Field(title="Position")]
    prob: Annotated[float, Field(title="Prob")]


class AuditItem(BaseModel):
    """
    A question, its options and the index of the right one.
    """

    answer_index: Annotated[int, Field(ge=0, title="Answer Index")]
    id: Annotated[str, Field(max_length=200, title="Id")] = ""
    options: Annotated[list[str], Field(max_length=10, min_length=2, title="Options")]
    """
    Option texts, A, B, ...
    """
    question: Annotated[str, Field(title="Question")]


MaxEvalTokens1 = TypeAliasType(
    "MaxEvalTokens1", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model1 = TypeAliasType("Model1", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class AuditRequest(BaseModel):
    """
    POST /v1/mcq/audit: every item under full vs choices-only x base vs reason.
    """

    artifact_threshold: Annotated[float, Field(gt=0.0, le=1.0, title="Artifact Threshold")] = 0.8
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    conditions: Annotated[
        list[Literal["full_base", "full_reason", "choices_only_base", "choices_only_reason"]],
        Field(min_length=1, title="Conditions"),
    ] = ["full_base", "full_reason", "choices_only_base", "choices_only_reason"]
    evidence_tokens: Annotated[int, Field(ge=1, le=256, title="Evidence Tokens")] = 24
    idk: Annotated[bool, Field(title="Idk")] = False
    """
    Append an 'I don't know' option (choosing it counts as wrong); items with 10 options are refused.
    """
    inferred_question: Annotated[bool, Field(title="Inferred Question")] = False
    """
    choices_only_reason: a judge writes the question each trace reconstructs (or none) and reads whether it asks what the real question asks; the match rate of correct and incorrect traces (docs/methods.md C.3).
    """
    items: Annotated[list[AuditItem], Field(min_length=1, title="Items")]
    max_eval_tokens: Annotated[MaxEvalTokens1 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    model: Annotated[Model1 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    perturbations: Annotated[bool, Field(title="Perturbations")] = False
    """
    Also answer (base conditions) with an injected duplicate, nonsense or false option, and report how often the answer changes.
    """
    predictability: Annotated[bool, Field(title="Predictability")] = False
    """
    Reason conditions: a judge reads each trace with the lettered options, without the question, its ANSWER line and a last paragraph naming a letter, and predicts the letter; agreement with the letter read (docs/methods.md C.3).
    """
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget of the reason conditions.
    """
    return_rationales: Annotated[bool, Field(title="Return Rationales")] = True
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Sampling seed (temperature > 0).
    """
    tag_strategies: Annotated[bool, Field(title="Tag Strategies")] = False
    """
    Tag the choices_only_reason rationales with the six strategy labels and regress correctness on them.
    """
    temperature: Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")] = 0.0
    trace_judge: Annotated[Literal["served", "remote"], Field(title="Trace Judge")] = "served"
    """
    Who reads the traces (predictability, inferred_question): the served model, or the remote judge the service was started with (VERIFIER_AUDIT__REMOTE_JUDGE), e.g. a stronger model.
    """


class BudgetInfo(BaseModel):
    """
    What the planner decided; present when the request set max_eval_tokens.
    """

    degraded: Annotated[bool, Field(title="Degraded")] = False
    estimate: Annotated[int, Field(title="Estimate")]
    max_eval_tokens: Annotated[int, Field(title="Max Eval Tokens")]
    note: Annotated[str | None, Field(title="Note")] = None


Mode = TypeAliasType("Mode", Annotated[Literal["explicit"], Field(title="Mode")])


class CacheBreakpoint(BaseModel):
    """
    Accepted for compatibility; vLLM's prefix cache needs no breakpoints (it matches by
    content).
    """

    mode: Annotated[Literal["explicit"], Field(title="Mode")]


class CalibrationCost(BaseModel):
    forward_passes: Annotated[int, Field(title="Forward Passes")]
    tokens: Annotated[int, Field(title="Tokens")]


class CalibrationDefault(BaseModel):
    """
    PUT /v1/calibrations/defaults/{target}.
    """

    calibration_id: Annotated[str, Field(title="Calibration Id")]


Object = TypeAliasType("Object", Annotated[Literal["calibration.defaults"], Field(title="Object")])


class CalibrationDefaults(BaseModel):
    defaults: Annotated[dict[str, str], Field(title="Defaults")]
    """
    target -> the tenant's default calibration id.
    """
    object: Annotated[Literal["calibration.defaults"], Field(title="Object")] = (
        "calibration.defaults"
    )


class CalibrationInfo(BaseModel):
    """
    Which calibration an answer's probability went through (absent: the raw read).
    """

    id: Annotated[str, Field(title="Id")]
    method: Annotated[Literal["temperature", "platt"], Field(title="Method")]
    parameters: Annotated[dict[str, float | bool], Field(title="Parameters")]


K3 = TypeAliasType("K3", Annotated[int, Field(ge=2, le=10, title="K")])
"""
contextual without items: the number of options.
"""


MaxEvalTokens4 = TypeAliasType(
    "MaxEvalTokens4", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model5 = TypeAliasType("Model5", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class CaseResult(BaseModel):
    status: Annotated[Literal["passed", "failed", "timeout", "error"], Field(title="Status")]
    stderr_tail: Annotated[str, Field(title="Stderr Tail")] = ""
    """
    The last 500 characters of stderr.
    """
    time_ms: Annotated[float, Field(title="Time Ms")]
    """
    Wall time of the case's run, sandbox start included.
    """


Type = TypeAliasType("Type", Annotated[Literal["choice"], Field(title="Type")])


class ChoiceOption(BaseModel):
    description: Annotated[str | None, Field(title="Description")] = None
    value: Annotated[str | bool, Field(title="Value")]


class ChoiceProbability(BaseModel):
    probability: Annotated[float, Field(title="Probability")]
    value: Annotated[str | bool, Field(title="Value")]


class ChoiceSpec(BaseModel):
    """
    Multiple choice: the gold letter against the letter the response ends on (its last
    ``ANSWER: X`` line, a response that is only a letter, or "the answer is (X)").
    """

    answer: Annotated[str, Field(title="Answer")]
    """
    The gold letter, or the gold option's text (then send `options`, or the response's final answer text is compared with it).
    """
    options: Annotated[list[str] | None, Field(title="Options")] = None
    """
    The options in letter order, to map gold text to a letter.
    """
    type: Annotated[Literal["choice"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


class ClassificationData(BaseModel):
    index: Annotated[int, Field(title="Index")]
    label: Annotated[str | None, Field(title="Label")]
    num_classes: Annotated[int, Field(title="Num Classes")]
    probs: Annotated[list[float], Field(title="Probs")]


Model9 = TypeAliasType("Model9", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class ClassifyRequest(BaseModel):
    """
    POST /classify: one row of class scores per input (a sequence RM's reward).
    """

    add_generation_prompt: Annotated[bool, Field(title="Add Generation Prompt")] = False
    add_special_tokens: Annotated[bool | None, Field(title="Add Special Tokens")] = None
    """
    Add the tokenizer's special tokens (BOS). Unset: true for `input`, false for `messages` (the template holds them), as vLLM does.
    """
    cache_salt: Annotated[str | None, Field(title="Cache Salt")] = None
    chat_template: Annotated[str | None, Field(title="Chat Template")] = None
    chat_template_kwargs: Annotated[dict[str, Any] | None, Field(title="Chat Template Kwargs")] = (
        None
    )
    continue_final_message: Annotated[bool, Field(title="Continue Final Message")] = False
    input: Annotated[str | list[str] | list[int] | list[list[int]] | None, Field(title="Input")] = (
        None
    )
    """
    A text, texts, token ids, or lists of token ids.
    """
    messages: Annotated[list[dict[str, Any]] | None, Field(title="Messages")] = None
    """
    One chat, rendered with the model's chat template.
    """
    mm_processor_kwargs: Annotated[dict[str, Any] | None, Field(title="Mm Processor Kwargs")] = None
    model: Annotated[Model9 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    priority: Annotated[int, Field(title="Priority")] = 0
    request_id: Annotated[str | None, Field(title="Request Id")] = None
    truncate_prompt_tokens: Annotated[int | None, Field(title="Truncate Prompt Tokens")] = None
    use_activation: Annotated[bool | None, Field(title="Use Activation")] = None
    """
    Unset or true: probabilities (sigmoid for one class, softmax otherwise); false: raw logits, as verl and AReaL ask.
    """
    user: Annotated[str | None, Field(title="User")] = None


class CodeCase(BaseModel):
    """
    One test case: stdin/stdout, or assertion code.
    """

    assert_: Annotated[str | None, Field(alias="assert", title="Assert")] = None
    """
    Python run after the response's code in the same namespace; the case passes if it runs to its end (e.g. `assert f(2) == 4`, or HumanEval's `check(f)`).
    """
    input: Annotated[str | None, Field(title="Input")] = None
    """
    stdin of the program (stdin/stdout cases).
    """
    output: Annotated[str | None, Field(title="Output")] = None
    """
    The expected stdout; compared line by line, trailing whitespace and trailing blank lines ignored.
    """


class CodeResult(BaseModel):
    """
    What the tests said of one response.
    """

    cases: Annotated[list[CaseResult], Field(title="Cases")]
    passed: Annotated[int, Field(title="Passed")]
    reason: Annotated[str | None, Field(title="Reason")] = None
    """
    Why no case ran (e.g. no code block in the language).
    """
    reward: Annotated[float, Field(title="Reward")]
    """
    1/0 for all_pass, the pass share for fraction.
    """
    reward_rule: Annotated[Literal["all_pass", "fraction"], Field(title="Reward Rule")]
    total: Annotated[int, Field(title="Total")]


TestTimeoutS1 = TypeAliasType(
    "TestTimeoutS1", Annotated[float, Field(gt=0.0, title="Test Timeout S")]
)
"""
Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
"""


Type3 = TypeAliasType("Type3", Annotated[Literal["code"], Field(title="Type")])


class CodeSpec(BaseModel):
    """
    The response's code run against ``tests`` in the sandbox (needs code execution on):
    ``language``, ``test_timeout_s`` and ``code_reward`` as a judgment's code fields.
    """

    code_reward: Annotated[Literal["all_pass", "fraction"] | None, Field(title="Code Reward")] = (
        None
    )
    """
    all_pass: 1 only if every case passes; fraction: the share that pass. Default VERIFIER_CODE__REWARD.
    """
    language: Annotated[str, Field(title="Language")] = "python"
    """
    The language of the response's code (its last fenced block in that language, else its last untagged block, else the whole response when it has no fence). `python`; `bash` and `nodejs` where the host has them (/v1/models lists code_languages). Assertion cases need python.
    """
    test_timeout_s: Annotated[TestTimeoutS1 | None, Field(title="Test Timeout S")] = None
    """
    Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
    """
    tests: Annotated[list[CodeCase] | None, Field(title="Tests")] = None
    """
    Test cases the response's code is run against in the sandbox (needs VERIFIER_CODE__ENABLED); the result is decided_by 'code'.
    """
    type: Annotated[Literal["code"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


class CommandRunResult(BaseModel):
    execution_time: Annotated[float | None, Field(title="Execution Time")] = None
    return_code: Annotated[int | None, Field(title="Return Code")] = None
    status: Annotated[Literal["Finished", "Error", "TimeLimitExceeded"], Field(title="Status")]
    stderr: Annotated[str, Field(title="Stderr")] = ""
    stdout: Annotated[str, Field(title="Stdout")] = ""


class CompareExample(BaseModel):
    """
    One labelled pair: the question, two responses and which of them is preferred.
    """

    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    preferred: Annotated[int, Field(title="Preferred")]
    """
    0 or 1: the index of the preferred response.
    """
    question: Annotated[str, Field(title="Question")]
    """
    The problem both responses answer.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    responses: Annotated[list[str], Field(max_length=2, min_length=2, title="Responses")]
    """
    The two responses, in any order.
    """


class CompareRead(BaseModel):
    order: Annotated[list[int], Field(title="Order")]
    """
    The responses shown, as letters A, B, ... in order.
    """
    probabilities: Annotated[list[float], Field(title="Probabilities")]
    """
    Each shown letter's probability, normalised over the letters shown (after PriDe, with debias='pride').
    """
    reasoning: Annotated[str | None, Field(title="Reasoning")] = None
    """
    The written comparison, if any.
    """
    sample: Annotated[int, Field(title="Sample")] = 0


MaxEvalTokens6 = TypeAliasType(
    "MaxEvalTokens6", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model11 = TypeAliasType("Model11", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Permutations1 = TypeAliasType("Permutations1", Annotated[int, Field(ge=1, title="Permutations")])
"""
listwise with permute: cyclic orders read (default: one per response, so every response is shown at every letter once).
"""


ReasoningTokens2 = TypeAliasType(
    "ReasoningTokens2", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Compare in writing within this many tokens before each read; unset: read at once.
"""


Temperature2 = TypeAliasType(
    "Temperature2", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Sampling temperature of the comparisons; default 0 for one sample, 0.7 for several.
"""


class CompareRequest(BaseModel):
    """
    POST /v1/judge/compare. A reference and criteria are shown to the judge.
    """

    aggregation: Annotated[
        Literal["bradley_terry", "win_rate", "mean_probability"] | None,
        Field(title="Aggregation"),
    ] = None
    """
    pairwise: bradley_terry (default) or win_rate; listwise: mean_probability (default), or either of those over the listwise preference matrix.
    """
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    listwise with pride: a PriDe calibration fitted on items with as many options as there are responses (POST /v1/mcq/calibrations). On /v1/judge/compare also a probability calibration of target 'compare' (pcal_..., POST /v1/calibrations) mapping the pairwise preferences, or 'none' for the raw read when the tenant has a default.
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    debias: Annotated[Literal["swap", "permute", "pride", "none"] | None, Field(title="Debias")] = (
        None
    )
    """
    Position debiasing. pairwise: swap (default: both orders of every pair) or none; listwise: permute (default: cyclic orders), pride (a stored letter prior, one read) or none.
    """
    max_eval_tokens: Annotated[MaxEvalTokens6 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    mode: Annotated[Literal["pairwise", "listwise"], Field(title="Mode")] = "pairwise"
    """
    pairwise: every pair read (in both orders by default); listwise: all responses in one prompt, 'which is best' read over their letters.
    """
    model: Annotated[Model11 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    permutations: Annotated[Permutations1 | None, Field(title="Permutations")] = None
    """
    listwise with permute: cyclic orders read (default: one per response, so every response is shown at every letter once).
    """
    question: Annotated[str, Field(title="Question")]
    """
    The problem the responses answer.
    """
    reasoning_tokens: Annotated[ReasoningTokens2 | None, Field(title="Reasoning Tokens")] = None
    """
    Compare in writing within this many tokens before each read; unset: read at once.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    responses: Annotated[list[str], Field(title="Responses")]
    """
    2 or more candidate responses, compared together.
    """
    return_reads: Annotated[bool, Field(title="Return Reads")] = True
    """
    Return every read (its order and letter probabilities).
    """
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled comparisons per order (needs reasoning_tokens).
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    temperature: Annotated[Temperature2 | None, Field(title="Temperature")] = None
    """
    Sampling temperature of the comparisons; default 0 for one sample, 0.7 for several.
    """


class CompareResult(BaseModel):
    index: Annotated[int, Field(title="Index")]
    raw_score: Annotated[float | None, Field(title="Raw Score")] = None
    """
    The raw score when a calibration mapped `score`; else null.
    """
    reward: Annotated[float, Field(title="Reward")]
    """
    bradley_terry: the centred log-strength; win_rate: the win rate; mean_probability: log of the mean probability of being best.
    """
    score: Annotated[float, Field(title="Score")]
    """
    In [0, 1]. bradley_terry: the expected win rate under the fit; win_rate: the win rate; mean_probability: the mean probability of being best (sums to 1). Calibrated (two responses only): the calibrated preference over the other.
    """


Permutations3 = TypeAliasType("Permutations3", Annotated[int, Field(ge=1, title="Permutations")])
"""
listwise with permute: cyclic orders read (default: one per response, so every response is shown at every letter once).
"""


class CompareSpec(BaseModel):
    """
    How responses are compared: the fields of /v1/judge/compare, and the ``compare``
    object of /v1/score, /v1/rerank and /get_reward with ``method: "compare"``.
    """

    aggregation: Annotated[
        Literal["bradley_terry", "win_rate", "mean_probability"] | None,
        Field(title="Aggregation"),
    ] = None
    """
    pairwise: bradley_terry (default) or win_rate; listwise: mean_probability (default), or either of those over the listwise preference matrix.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    listwise with pride: a PriDe calibration fitted on items with as many options as there are responses (POST /v1/mcq/calibrations). On /v1/judge/compare also a probability calibration of target 'compare' (pcal_..., POST /v1/calibrations) mapping the pairwise preferences, or 'none' for the raw read when the tenant has a default.
    """
    debias: Annotated[Literal["swap", "permute", "pride", "none"] | None, Field(title="Debias")] = (
        None
    )
    """
    Position debiasing. pairwise: swap (default: both orders of every pair) or none; listwise: permute (default: cyclic orders), pride (a stored letter prior, one read) or none.
    """
    mode: Annotated[Literal["pairwise", "listwise"], Field(title="Mode")] = "pairwise"
    """
    pairwise: every pair read (in both orders by default); listwise: all responses in one prompt, 'which is best' read over their letters.
    """
    permutations: Annotated[Permutations3 | None, Field(title="Permutations")] = None
    """
    listwise with permute: cyclic orders read (default: one per response, so every response is shown at every letter once).
    """


class CompareSummary(BaseModel):
    """
    What a comparison found, without its per-response results (``/v1/score``'s
    ``comparison``).
    """

    aggregation: Annotated[
        Literal["bradley_terry", "win_rate", "mean_probability"],
        Field(title="Aggregation"),
    ]
    debias: Annotated[Literal["swap", "permute", "pride", "none"], Field(title="Debias")]
    first_position_rate: Annotated[float | None, Field(title="First Position Rate")]
    """
    The mean probability of the first letter shown (no position bias: 1/2 pairwise, 1/n listwise), before PriDe.
    """
    mode: Annotated[Literal["pairwise", "listwise"], Field(title="Mode")]
    passes: Annotated[int, Field(title="Passes")]
    """
    Reads made (orders x samples).
    """
    position_consistency: Annotated[float | None, Field(title="Position Consistency")]
    """
    The share of pairs whose preferred response is the same in every order read; null when each pair was read in one order only.
    """
    preferences: Annotated[list[list[float | None]], Field(title="Preferences")]
    """
    preferences[i][j]: P(response i preferred over j), the mean over the reads showing both (listwise: p_i / (p_i + p_j)); [i][j] + [j][i] = 1; the diagonal is null.
    """


class CriterionResult(BaseModel):
    holds: Annotated[bool, Field(title="Holds")]
    """
    P(yes) >= 0.5 for a positive weight; P(yes) < 0.5 for a penalty.
    """
    probability: Annotated[float, Field(title="Probability")]
    """
    P(yes) that the criterion holds.
    """


Type4 = TypeAliasType("Type4", Annotated[Literal["custom_tool_call"], Field(title="Type")])


class CustomToolCall(BaseModel):
    call_id: Annotated[str, Field(title="Call Id")]
    id: Annotated[str | None, Field(title="Id")] = None
    input: Annotated[str, Field(title="Input")]
    name: Annotated[str, Field(title="Name")]
    namespace: Annotated[str | None, Field(title="Namespace")] = None
    status: Annotated[
        Literal["in_progress", "completed", "incomplete"] | None, Field(title="Status")
    ] = None
    type: Annotated[Literal["custom_tool_call"], Field(title="Type")]


Type5 = TypeAliasType("Type5", Annotated[Literal["custom_tool_call_output"], Field(title="Type")])


class DebiasInfo(BaseModel):
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    method: Annotated[Literal["none", "popdebias", "pride", "contextual"], Field(title="Method")]
    params: Annotated[dict[str, Any] | None, Field(title="Params")] = None
    """
    What was applied.
    """


class DecisionCalibrationInfo(BaseModel):
    """
    A decision's calibration: one temperature per question type. ``applied`` is false when
    none of the answered questions is of a type the calibration was fitted on.
    """

    applied: Annotated[bool, Field(title="Applied")]
    id: Annotated[str, Field(title="Id")]
    method: Annotated[Literal["temperature", "platt"], Field(title="Method")]
    parameters: Annotated[dict[str, float | bool], Field(title="Parameters")]
    temperatures: Annotated[dict[str, float], Field(title="Temperatures")]
    """
    Question type (predicate, choice, score) -> its temperature.
    """


MaxEvalTokens8 = TypeAliasType(
    "MaxEvalTokens8", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Temperature4 = TypeAliasType(
    "Temperature4", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Thinking temperature; default 0 for one sample, 0.7 for several.
"""


class ErrorDetail(BaseModel):
    message: Annotated[str, Field(title="Message")]
    type: Annotated[str, Field(title="Type")]


class ErrorResponse(BaseModel):
    error: ErrorDetail


Type7 = TypeAliasType("Type7", Annotated[Literal["function_call"], Field(title="Type")])


class FunctionCall(BaseModel):
    arguments: Annotated[str, Field(title="Arguments")]
    call_id: Annotated[str, Field(title="Call Id")]
    id: Annotated[str | None, Field(title="Id")] = None
    name: Annotated[str, Field(title="Name")]
    namespace: Annotated[str | None, Field(title="Namespace")] = None
    status: Annotated[
        Literal["in_progress", "completed", "incomplete"] | None, Field(title="Status")
    ] = None
    type: Annotated[Literal["function_call"], Field(title="Type")]


Type8 = TypeAliasType("Type8", Annotated[Literal["function_call_output"], Field(title="Type")])


class InferredQuestion(BaseModel):
    match_probability: Annotated[float | None, Field(title="Match Probability")]
    """
    P(yes) that it asks what the real question asks (null without a question).
    """
    matches: Annotated[bool | None, Field(title="Matches")]
    """
    match_probability >= 0.5.
    """
    question: Annotated[str | None, Field(title="Question")]
    """
    As the judge wrote it; null: the trace infers none.
    """


Type9 = TypeAliasType("Type9", Annotated[Literal["input_image"], Field(title="Type")])


class InputImage(BaseModel):
    """
    Part of the shape so that an image is refused by name (422), never misread.
    """

    detail: Annotated[Literal["low", "high", "auto", "original"] | None, Field(title="Detail")] = (
        None
    )
    image_url: Annotated[str, Field(title="Image Url")]
    prompt_cache_breakpoint: CacheBreakpoint | None = None
    type: Annotated[Literal["input_image"], Field(title="Type")]


Type10 = TypeAliasType("Type10", Annotated[Literal["input_json"], Field(title="Type")])


class InputJSON(BaseModel):
    """
    A JSON object or an array of objects, shown to the model as compact JSON text.
    """

    data: Annotated[dict[str, Any] | list[dict[str, Any]], Field(title="Data")]
    type: Annotated[Literal["input_json"], Field(title="Type")]


Type11 = TypeAliasType("Type11", Annotated[Literal["input_text"], Field(title="Type")])


class InputText(BaseModel):
    prompt_cache_breakpoint: CacheBreakpoint | None = None
    text: Annotated[str, Field(title="Text")]
    type: Annotated[Literal["input_text"], Field(title="Type")]


class InputTokensDetails(BaseModel):
    cache_write_tokens: Annotated[int, Field(title="Cache Write Tokens")] = 0
    """
    Always 0: no explicit cache writes (vLLM caches by content).
    """
    cached_tokens: Annotated[int, Field(title="Cached Tokens")] = 0


class MCQAnswer(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    answer_letter: Annotated[str, Field(title="Answer Letter")]
    debias: DebiasInfo
    popularity: Annotated[list[float] | None, Field(title="Popularity")] = None
    """
    The popularity used.
    """
    probs: Annotated[list[float], Field(title="Probs")]
    """
    After debiasing (= probs_raw for 'none').
    """
    probs_raw: Annotated[list[float], Field(title="Probs Raw")]
    """
    Softmax over the K option letters.
    """
    uncalibrated_probs: Annotated[list[float] | None, Field(title="Uncalibrated Probs")] = None
    """
    `probs` before a probability calibration mapped them (after debiasing); null when none did.
    """


MaxEvalTokens10 = TypeAliasType(
    "MaxEvalTokens10", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model16 = TypeAliasType("Model16", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class MCQAnswerRequest(BaseModel):
    """
    POST /v1/mcq/answer.
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A debiasing calibration of this tenant (cal_..., POST /v1/mcq/calibrations) for pride, popdebias or contextual; or a probability calibration (pcal_..., POST /v1/calibrations, target 'mcq') that maps `probs` through its temperature; 'none' for the raw read. Unset: the tenant's default mcq calibration, when one is marked and was fitted for this model.
    """
    debias: Annotated[
        Literal["none", "popdebias", "pride", "contextual"], Field(title="Debias")
    ] = "none"
    """
    popdebias: remove a popularity prior (needs popularity and a calibration or popdebias_lambda); pride: remove an option-letter prior (needs a calibration); contextual: divide by the letter probabilities on content-free inputs.
    """
    max_eval_tokens: Annotated[MaxEvalTokens10 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    model: Annotated[Model16 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    options: Annotated[list[str], Field(max_length=10, min_length=2, title="Options")]
    """
    Option texts, A, B, ...
    """
    phi: Annotated[Literal["pop", "log"], Field(title="Phi")] = "pop"
    """
    PopDebias phi(pop): pop or log(pop).
    """
    popdebias_lambda: Annotated[float | None, Field(title="Popdebias Lambda")] = None
    """
    PopDebias lambda to use without a calibration.
    """
    popularity: Annotated[list[float] | Literal["model"] | None, Field(title="Popularity")] = None
    """
    One value in [0, 1] per option, used as given; or 'model': the model's question-free mean log-probability of each option text, min-max normalised per question (all equal: 0.5 each). The PopMCQ paper used normalised Wikipedia page views; 'model' is a proxy the service can compute itself, not that signal.
    """
    question: Annotated[str, Field(title="Question")]


MaxEvalTokens12 = TypeAliasType(
    "MaxEvalTokens12", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model19 = TypeAliasType("Model19", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class MCQExample(BaseModel):
    """
    One labelled multiple-choice question: its options and the index of the right one.
    """

    answer_index: Annotated[int, Field(ge=0, title="Answer Index")]
    id: Annotated[str, Field(max_length=200, title="Id")] = ""
    options: Annotated[list[str], Field(max_length=10, min_length=2, title="Options")]
    """
    Option texts, A, B, ...
    """
    question: Annotated[str, Field(title="Question")]


class MCQItem(BaseModel):
    """
    One multiple-choice question with 2-10 options.
    """

    options: Annotated[list[str], Field(max_length=10, min_length=2, title="Options")]
    """
    Option texts, A, B, ...
    """
    popularity: Annotated[list[float] | Literal["model"] | None, Field(title="Popularity")] = None
    """
    One value in [0, 1] per option, used as given; or 'model': the model's question-free mean log-probability of each option text, min-max normalised per question (all equal: 0.5 each). The PopMCQ paper used normalised Wikipedia page views; 'model' is a proxy the service can compute itself, not that signal.
    """
    question: Annotated[str, Field(title="Question")]


class MatchRate(BaseModel):
    ci_high: Annotated[float | None, Field(title="Ci High")]
    ci_low: Annotated[float | None, Field(title="Ci Low")]
    """
    95% Wilson interval.
    """
    match_rate: Annotated[float | None, Field(title="Match Rate")]
    """
    Share whose question matches the real one.
    """
    n: Annotated[int, Field(title="N")]
    """
    Traces of this kind that infer a question.
    """


ReasoningTokens5 = TypeAliasType(
    "ReasoningTokens5", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Default: the request's reasoning_tokens.
"""


Temperature6 = TypeAliasType(
    "Temperature6", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale temperature; default 0 for one sample, 0.7 for several.
"""


Type12 = TypeAliasType("Type12", Annotated[Literal["math"], Field(title="Type")])


class MathSpec(BaseModel):
    """
    The response's final answer against ``reference`` by rule (math-verify), the model
    where the rule cannot decide (docs/methods.md E).
    """

    mode: Annotated[Literal["direct", "reasoning"] | None, Field(title="Mode")] = None
    """
    Default: the request's mode.
    """
    model_fallback: Annotated[bool, Field(title="Model Fallback")] = True
    """
    false: rule only (an undecided check is 0, reason given), no engine call.
    """
    reasoning_tokens: Annotated[ReasoningTokens5 | None, Field(title="Reasoning Tokens")] = None
    """
    Default: the request's reasoning_tokens.
    """
    reference: Annotated[str, Field(title="Reference")]
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales, probabilities averaged (needs mode 'reasoning' here).
    """
    temperature: Annotated[Temperature6 | None, Field(title="Temperature")] = None
    """
    Rationale temperature; default 0 for one sample, 0.7 for several.
    """
    type: Annotated[Literal["math"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


Type13 = TypeAliasType("Type13", Annotated[Literal["message"], Field(title="Type")])


Object2 = TypeAliasType("Object2", Annotated[Literal["model"], Field(title="Object")])


class ModelCard(BaseModel):
    code_execution: Annotated[bool, Field(title="Code Execution")] = False
    """
    Code sent with requests is run in the sandbox (/run_code, `tests`, code specs); off: those answer 422 code_execution_disabled.
    """
    code_languages: Annotated[list[str] | None, Field(title="Code Languages")] = None
    """
    The languages runs take, once a sandbox runs in this process.
    """
    device: Annotated[str | None, Field(title="Device")] = None
    """
    cpu or cuda, once the engine runs.
    """
    dtype: Annotated[str | None, Field(title="Dtype")] = None
    """
    The engine's dtype (what `dtype=auto` resolved to).
    """
    id: Annotated[str, Field(title="Id")]
    kind: Annotated[
        Literal["generative", "reward", "process_reward"] | None, Field(title="Kind")
    ] = None
    """
    generative: a judge read at a verdict slot; reward: a sequence reward model; process_reward: a PRM (both on vLLM's pooling runner). From the settings or a local model's config.json; null where neither tells, until the engine runs.
    """
    max_model_len: Annotated[int, Field(title="Max Model Len")]
    object: Annotated[Literal["model"], Field(title="Object")] = "model"
    owned_by: Annotated[str, Field(title="Owned By")] = "verifier-service"
    parent: Annotated[str | None, Field(title="Parent")] = None
    """
    A LoRA adapter: the served model it adapts (its id is '<parent>:<adapter>', the name a request's `model` gives).
    """
    pooling_task: Annotated[str | None, Field(title="Pooling Task")] = None
    """
    Pooling kinds: classify or token_classify (/pooling's task).
    """
    ready: Annotated[bool, Field(title="Ready")] = False
    """
    Its engine runs here, or a worker reads its queue.
    """
    root: Annotated[str, Field(title="Root")]
    step_tag: Annotated[str | None, Field(title="Step Tag")] = None
    """
    process_reward: the step tag.
    """
    workers: Annotated[int | None, Field(title="Workers")] = None
    """
    Worker processes reading this model's queue, seen within queue.claim_idle_ms (a model run in the API process counts as one); null when the queue cannot be read.
    """


Object3 = TypeAliasType("Object3", Annotated[Literal["list"], Field(title="Object")])


class ModelList(BaseModel):
    data: Annotated[list[ModelCard], Field(title="Data")]
    object: Annotated[Literal["list"], Field(title="Object")] = "list"


class ModelReadiness(BaseModel):
    name: Annotated[str, Field(title="Name")]
    ready: Annotated[bool, Field(title="Ready")]
    """
    Its engine runs here, or a worker reads its queue.
    """
    workers: Annotated[int | None, Field(title="Workers")]
    """
    As in /v1/models.
    """


ReasoningTokens7 = TypeAliasType(
    "ReasoningTokens7", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Default: the request's reasoning_tokens.
"""


Temperature8 = TypeAliasType(
    "Temperature8", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale temperature; default 0 for one sample, 0.7 for several.
"""


Type14 = TypeAliasType("Type14", Annotated[Literal["model"], Field(title="Type")])


class ModelSpec(BaseModel):
    """
    The served judge's P(correct) (an outcome judgment), with optional criteria and
    reference in its prompt.
    """

    criteria: Annotated[str | None, Field(title="Criteria")] = None
    mode: Annotated[Literal["direct", "reasoning"] | None, Field(title="Mode")] = None
    """
    Default: the request's mode.
    """
    reasoning_tokens: Annotated[ReasoningTokens7 | None, Field(title="Reasoning Tokens")] = None
    """
    Default: the request's reasoning_tokens.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales, probabilities averaged (needs mode 'reasoning' here).
    """
    temperature: Annotated[Temperature8 | None, Field(title="Temperature")] = None
    """
    Rationale temperature; default 0 for one sample, 0.7 for several.
    """
    type: Annotated[Literal["model"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


class NemoCreateParams(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    input: Annotated[str | list[dict[str, Any]], Field(title="Input")]


class NemoResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    output: Annotated[list[dict[str, Any]] | None, Field(title="Output")] = None


class NemoVerifyRequest(BaseModel):
    """
    NeMo Gym's ``BaseVerifyRequest`` and the row's task fields (all echoed back).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    components: Annotated[dict[str, Any] | None, Field(title="Components")] = None
    expected_answer: Annotated[str | None, Field(title="Expected Answer")] = None
    """
    Without a spec: the gold answer (math; choice when `options` are sent).
    """
    formula: Annotated[str | None, Field(title="Formula")] = None
    options: Annotated[list[Any] | None, Field(title="Options")] = None
    """
    NeMo Gym's MCQ options ([{'A': text}, ...] or texts).
    """
    response: NemoResponse
    responses_create_params: NemoCreateParams
    verifier: Annotated[dict[str, Any] | None, Field(title="Verifier")] = None
    """
    The row's verification spec, as /v1/rewards takes it.
    """


class NemoVerifyResponse(BaseModel):
    """
    NeMo Gym's ``BaseVerifyResponse`` (the request echoed, ``reward``) with
    ``reward_components`` when the row has components, and this service's detail.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    components: Annotated[dict[str, Any] | None, Field(title="Components")] = None
    decided_by: Annotated[str, Field(title="Decided By")]
    expected_answer: Annotated[str | None, Field(title="Expected Answer")] = None
    """
    Without a spec: the gold answer (math; choice when `options` are sent).
    """
    extracted_answer: Annotated[str | None, Field(title="Extracted Answer")] = None
    failed: Annotated[str | None, Field(title="Failed")] = None
    formula: Annotated[str | None, Field(title="Formula")] = None
    options: Annotated[list[Any] | None, Field(title="Options")] = None
    """
    NeMo Gym's MCQ options ([{'A': text}, ...] or texts).
    """
    response: NemoResponse
    responses_create_params: NemoCreateParams
    reward: Annotated[float, Field(title="Reward")]
    reward_components: Annotated[dict[str, float] | None, Field(title="Reward Components")] = None
    timed_out: Annotated[bool, Field(title="Timed Out")] = False
    verifier: Annotated[dict[str, Any] | None, Field(title="Verifier")] = None
    """
    The row's verification spec, as /v1/rewards takes it.
    """


class OpenRecallItem(BaseModel):
    answer: Annotated[str, Field(title="Answer")]
    """
    The free-form answer as generated.
    """
    distractor: Annotated[str | None, Field(title="Distractor")]
    """
    A wrong candidate found in it (not known).
    """
    item_id: Annotated[str, Field(title="Item Id")]
    known: Annotated[bool, Field(title="Known")]
    matched: Annotated[str | None, Field(title="Matched")]
    """
    The gold answer or alias found in it.
    """
    read: Annotated[str, Field(title="Read")]
    """
    Its first sentence, normalised: what is matched.
    """


class OutcomeExample(BaseModel):
    """
    One labelled judgment: the request an outcome call would send, and whether the response
    is correct (1) or not (0).
    """

    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    label: Annotated[int, Field(title="Label")]
    """
    1: the response is correct; 0: it is not.
    """
    question: Annotated[str, Field(title="Question")]
    """
    The problem the response answers.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    response: Annotated[str, Field(title="Response")]
    """
    The candidate answer under judgment.
    """


MaxEvalTokens14 = TypeAliasType(
    "MaxEvalTokens14", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model22 = TypeAliasType("Model22", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Temperature10 = TypeAliasType(
    "Temperature10", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale sampling temperature; default 0 for one sample, 0.7 for several.
"""


TestTimeoutS3 = TypeAliasType(
    "TestTimeoutS3", Annotated[float, Field(gt=0.0, title="Test Timeout S")]
)
"""
Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
"""


class OutcomeRequest(BaseModel):
    """
    POST /v1/judge/outcome.
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Answer identical judgments (greedy or seeded) from the judgment cache; false scores every judgment afresh.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A probability calibration of this tenant (POST /v1/calibrations) to map the score through; 'none' for the raw read. Unset: the tenant's default for this target, when one is marked and was fitted for this mode and model.
    """
    code_reward: Annotated[Literal["all_pass", "fraction"] | None, Field(title="Code Reward")] = (
        None
    )
    """
    all_pass: 1 only if every case passes; fraction: the share that pass. Default VERIFIER_CODE__REWARD.
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    language: Annotated[str, Field(title="Language")] = "python"
    """
    The language of the response's code (its last fenced block in that language, else its last untagged block, else the whole response when it has no fence). `python`; `bash` and `nodejs` where the host has them (/v1/models lists code_languages). Assertion cases need python.
    """
    max_eval_tokens: Annotated[MaxEvalTokens14 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")] = "direct"
    """
    direct: read the verdict at once; reasoning: write a rationale first.
    """
    model: Annotated[Model22 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    question: Annotated[str, Field(title="Question")]
    """
    The problem the response answers.
    """
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget per judgment (reasoning mode).
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    response: Annotated[str, Field(title="Response")]
    """
    The candidate answer under judgment.
    """
    return_rationale: Annotated[bool, Field(title="Return Rationale")] = False
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales per judgment; scores are averaged.
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    temperature: Annotated[Temperature10 | None, Field(title="Temperature")] = None
    """
    Rationale sampling temperature; default 0 for one sample, 0.7 for several.
    """
    test_timeout_s: Annotated[TestTimeoutS3 | None, Field(title="Test Timeout S")] = None
    """
    Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
    """
    tests: Annotated[list[CodeCase] | None, Field(title="Tests")] = None
    """
    Test cases the response's code is run against in the sandbox (needs VERIFIER_CODE__ENABLED); the result is decided_by 'code'.
    """
    verifier: Annotated[Literal["model", "rule", "hybrid"] | None, Field(title="Verifier")] = None
    """
    model: the model judges (with the reference in its prompt, if given); rule: the answer is compared with the reference by rule, no engine call (undecided = score null); hybrid: the rule where it decides, else the model. Default: hybrid with a reference, model without.
    """


Type15 = TypeAliasType("Type15", Annotated[Literal["output_text"], Field(title="Type")])


class OutputText(BaseModel):
    text: Annotated[str, Field(title="Text")]
    type: Annotated[Literal["output_text"], Field(title="Type")]


class OutputTokensDetails(BaseModel):
    reasoning_tokens: Annotated[int, Field(title="Reasoning Tokens")] = 0


class PerturbationResult(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    """
    Chosen option as its original index (a duplicate counts as the option it copies); -1: an injected new text.
    """
    changed: Annotated[bool, Field(title="Changed")]
    chose_injected: Annotated[bool, Field(title="Chose Injected")]
    inserted_at: Annotated[int, Field(title="Inserted At")]


class PerturbationSummary(BaseModel):
    answer_change_rate: Annotated[float | None, Field(title="Answer Change Rate")]
    injected_chosen_rate: Annotated[float | None, Field(title="Injected Chosen Rate")]
    n: Annotated[int, Field(title="N")]


Popularity5 = TypeAliasType(
    "Popularity5", Annotated[float, Field(ge=0.0, le=1.0, title="Popularity")]
)


class PoolOption(BaseModel):
    popularity: Annotated[Popularity5 | None, Field(title="Popularity")] = None
    text: Annotated[str, Field(title="Text")]


Model25 = TypeAliasType("Model25", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class PoolingRequest(BaseModel):
    """
    POST /pooling: the model's pooling output per input (token rows for a PRM).
    """

    add_generation_prompt: Annotated[bool, Field(title="Add Generation Prompt")] = False
    add_special_tokens: Annotated[bool | None, Field(title="Add Special Tokens")] = None
    """
    Add the tokenizer's special tokens (BOS). Unset: true for `input`, false for `messages` (the template holds them), as vLLM does.
    """
    cache_salt: Annotated[str | None, Field(title="Cache Salt")] = None
    chat_template: Annotated[str | None, Field(title="Chat Template")] = None
    chat_template_kwargs: Annotated[dict[str, Any] | None, Field(title="Chat Template Kwargs")] = (
        None
    )
    continue_final_message: Annotated[bool, Field(title="Continue Final Message")] = False
    dimensions: Annotated[int | None, Field(title="Dimensions")] = None
    encoding_format: Annotated[
        Literal["float", "base64", "bytes", "bytes_only"],
        Field(title="Encoding Format"),
    ] = "float"
    input: Annotated[str | list[str] | list[int] | list[list[int]] | None, Field(title="Input")] = (
        None
    )
    """
    A text, texts, token ids, or lists of token ids.
    """
    messages: Annotated[list[dict[str, Any]] | None, Field(title="Messages")] = None
    """
    One chat, rendered with the model's chat template.
    """
    mm_processor_kwargs: Annotated[dict[str, Any] | None, Field(title="Mm Processor Kwargs")] = None
    model: Annotated[Model25 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    priority: Annotated[int, Field(title="Priority")] = 0
    request_id: Annotated[str | None, Field(title="Request Id")] = None
    task: Annotated[
        Literal["classify", "token_classify", "embed", "token_embed", "plugin", "score"] | None,
        Field(title="Task"),
    ] = None
    """
    Unset: the model's own (classify or token_classify).
    """
    truncate_prompt_tokens: Annotated[int | None, Field(title="Truncate Prompt Tokens")] = None
    use_activation: Annotated[bool | None, Field(title="Use Activation")] = None
    """
    Unset or true: probabilities (sigmoid for one class, softmax otherwise); false: raw logits, as verl and AReaL ask.
    """
    user: Annotated[str | None, Field(title="User")] = None


class PoolingResponseData(BaseModel):
    data: Annotated[list[list[float]] | list[float], Field(title="Data")]
    index: Annotated[int, Field(title="Index")]
    object: Annotated[str, Field(title="Object")] = "pooling"


class PoolingUsage(BaseModel):
    """
    Our usage with vLLM's field names beside it (pooling generates nothing).
    """

    cached_judgments: Annotated[int, Field(title="Cached Judgments")] = 0
    """
    Judgments answered from the judgment cache (no tokens spent).
    """
    cached_tokens: Annotated[int, Field(title="Cached Tokens")] = 0
    completion_tokens: Annotated[int, Field(title="Completion Tokens")] = 0
    engine_calls: Annotated[int, Field(title="Engine Calls")] = 0
    generated_tokens: Annotated[int, Field(title="Generated Tokens")] = 0
    prompt_tokens: Annotated[int, Field(title="Prompt Tokens")] = 0
    prompt_tokens_details: Annotated[
        dict[str, int] | None, Field(title="Prompt Tokens Details")
    ] = None
    total_tokens: Annotated[int, Field(title="Total Tokens")] = 0


class PopMCQBuiltItem(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    chosen: Annotated[dict[str, int], Field(title="Chosen")]
    """
    Chosen option per debiasing method.
    """
    item_id: Annotated[str, Field(title="Item Id")]
    options: Annotated[list[str], Field(title="Options")]
    popularity: Annotated[list[float], Field(title="Popularity")]
    probs: Annotated[list[float], Field(title="Probs")]
    """
    The raw letter probabilities (before any method).
    """
    strategy: Annotated[Literal["S1", "S2", "S3", "S4", "S5", "S6"], Field(title="Strategy")]


class PopMCQCell(BaseModel):
    accuracy: Annotated[float | None, Field(title="Accuracy")]
    accuracy_se: Annotated[float | None, Field(title="Accuracy Se")]
    """
    Binomial standard error of the accuracy.
    """
    confidence: Annotated[float | None, Field(title="Confidence")]
    hpsr: Annotated[float | None, Field(title="Hpsr")]
    n: Annotated[int, Field(title="N")]
    overconfidence: Annotated[dict[str, float | None], Field(title="Overconfidence")]
    pop_gap: Annotated[float | None, Field(title="Pop Gap")]
    rho: Annotated[float | None, Field(title="Rho")]
    rho_relative: Annotated[float | None, Field(title="Rho Relative")]


MaxEvalTokens16 = TypeAliasType(
    "MaxEvalTokens16", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model28 = TypeAliasType("Model28", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Type16 = TypeAliasType("Type16", Annotated[Literal["predicate"], Field(title="Type")])


class PredicateAnswer(BaseModel):
    name: Annotated[str | None, Field(title="Name")] = None
    probability: Annotated[float, Field(title="Probability")]
    raw_probability: Annotated[float | None, Field(title="Raw Probability")] = None
    """
    Extension: the raw read when a calibration mapped `probability`.
    """
    type: Annotated[Literal["predicate"], Field(title="Type")] = "predicate"


class PredicateQuestion(BaseModel):
    """
    Estimate how likely it is that a statement about the input is true.
    """

    instructions: Annotated[
        str | list[Annotated[InputText | InputImage | InputJSON, Field(discriminator="type")]],
        Field(title="Instructions"),
    ]
    name: Annotated[str | None, Field(title="Name")] = None
    """
    Echoed in the answer; unique if given.
    """
    type: Annotated[Literal["predicate"], Field(title="Type")]


class PredictabilityModel(BaseModel):
    """
    Trace-to-answer predictability of one reason condition (docs/methods.md C.3).
    """

    agreement: Annotated[float | None, Field(title="Agreement")]
    """
    Predicted letter = the letter read.
    """
    chance: Annotated[float | None, Field(title="Chance")]
    """
    mean 1/K over the traces read.
    """
    ci_high: Annotated[float | None, Field(title="Ci High")]
    ci_low: Annotated[float | None, Field(title="Ci Low")]
    """
    95% Wilson interval of the agreement.
    """
    n: Annotated[int, Field(title="N")]
    """
    Traces read (an empty stripped trace is not).
    """
    n_empty: Annotated[int, Field(title="N Empty")]


Binning = TypeAliasType("Binning", Annotated[Literal["equal_mass"], Field(title="Binning")])


Object6 = TypeAliasType("Object6", Annotated[Literal["calibration"], Field(title="Object")])


Object7 = TypeAliasType("Object7", Annotated[Literal["list"], Field(title="Object")])


Model32 = TypeAliasType("Model32", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Object8 = TypeAliasType("Object8", Annotated[Literal["calibration"], Field(title="Object")])


MaxEvalTokens18 = TypeAliasType(
    "MaxEvalTokens18", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model35 = TypeAliasType("Model35", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Temperature12 = TypeAliasType(
    "Temperature12", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale sampling temperature; default 0 for one sample, 0.7 for several.
"""


class ProcessRequest(BaseModel):
    """
    POST /v1/judge/process. Give `steps` (used as given) or `response` (split).

    A `reference` (a reference solution or the gold answer) is context for every step's
    judgment; steps are always judged by the model (a rule can check only a final answer).
    """

    aggregation: Annotated[
        Literal["min", "mean", "mean_logit", "last", "prod"], Field(title="Aggregation")
    ] = "mean_logit"
    """
    mean_logit = sigmoid(mean step logit), the default.
    """
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Answer identical judgments (greedy or seeded) from the judgment cache; false scores every judgment afresh.
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    early_stop: Annotated[bool, Field(title="Early Stop")] = False
    """
    Judge steps in order and stop at the first below threshold.
    """
    max_eval_tokens: Annotated[MaxEvalTokens18 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    max_steps: Annotated[int, Field(ge=1, title="Max Steps")] = 64
    mode: Annotated[Literal["direct", "reasoning", "single_pass"], Field(title="Mode")] = "direct"
    """
    direct/reasoning: one judgment per step (step k sees steps 1..k-1 as context); single_pass: one prefill with a verdict slot after every step.
    """
    model: Annotated[Model35 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    question: Annotated[str, Field(title="Question")]
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget per judgment (reasoning mode).
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    response: Annotated[str | None, Field(title="Response")] = None
    return_rationale: Annotated[bool, Field(title="Return Rationale")] = False
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales per judgment; scores are averaged.
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    split: Annotated[Literal["heuristic", "model", "auto"], Field(title="Split")] = "heuristic"
    """
    How `response` is split.
    """
    steps: Annotated[list[str] | None, Field(title="Steps")] = None
    temperature: Annotated[Temperature12 | None, Field(title="Temperature")] = None
    """
    Rationale sampling temperature; default 0 for one sample, 0.7 for several.
    """
    threshold: Annotated[float, Field(gt=0.0, lt=1.0, title="Threshold")] = 0.5
    """
    First-error threshold.
    """
    verifier: Annotated[Literal["model", "rule", "hybrid"] | None, Field(title="Verifier")] = None
    """
    model: the model judges (with the reference in its prompt, if given); rule: the answer is compared with the reference by rule, no engine call (undecided = score null); hybrid: the rule where it decides, else the model. Default: hybrid with a reference, model without.
    """


Ttl = TypeAliasType("Ttl", Annotated[Literal["30m"], Field(title="Ttl")])


class PromptCacheOptions(BaseModel):
    mode: Annotated[Literal["implicit", "explicit"] | None, Field(title="Mode")] = None
    ttl: Annotated[Literal["30m"], Field(title="Ttl")] = "30m"


class Readiness(BaseModel):
    detail: Annotated[str | None, Field(title="Detail")] = None
    model: Annotated[str, Field(title="Model")]
    """
    The default model (what answers a request naming none).
    """
    models: Annotated[list[ModelReadiness] | None, Field(title="Models")] = None
    """
    Each served model, once the process is ready: requests for a model with no worker wait in its queue until one comes or their deadline passes.
    """
    status: Annotated[Literal["ready", "starting", "failed"], Field(title="Status")]


class ReasoningEffect(BaseModel):
    delta: Annotated[float | None, Field(title="Delta")]
    """
    Acc(reason) - Acc(base) on the same items.
    """
    n: Annotated[int, Field(title="N")]
    only_base_right: Annotated[int, Field(title="Only Base Right")]
    only_reason_right: Annotated[int, Field(title="Only Reason Right")]
    p_value: Annotated[float | None, Field(title="P Value")]
    """
    Exact McNemar (two-sided).
    """
    retention: Annotated[float | None, Field(title="Retention")]
    """
    Share of items where base letter = reason letter.
    """
    significant: Annotated[bool, Field(title="Significant")]


Type18 = TypeAliasType("Type18", Annotated[Literal["refusal"], Field(title="Type")])


class RefusalAnswer(BaseModel):
    """
    No answer to this question (its prompt does not fit the model, or its labels got less
    probability than min_label_probability); the other questions are answered.
    """

    name: Annotated[str | None, Field(title="Name")] = None
    type: Annotated[Literal["refusal"], Field(title="Type")] = "refusal"


class RefusalPart(BaseModel):
    refusal: Annotated[str, Field(title="Refusal")]
    type: Annotated[Literal["refusal"], Field(title="Type")]


class Regression(BaseModel):
    coefficients: Annotated[dict[str, dict[str, float | None]], Field(title="Coefficients")]
    converged: Annotated[bool | None, Field(title="Converged")] = None
    dropped: Annotated[list[str], Field(title="Dropped")]
    error: Annotated[str | None, Field(title="Error")] = None
    n: Annotated[int, Field(title="N")]
    warnings: Annotated[list[str] | None, Field(title="Warnings")] = None


class ReliabilityBin(BaseModel):
    """
    One equal-mass bin: its size, mean predicted probability, observed frequency of label 1,
    and its smallest and largest prediction.
    """

    count: Annotated[int, Field(title="Count")]
    lower: Annotated[float, Field(title="Lower")]
    mean_predicted: Annotated[float, Field(title="Mean Predicted")]
    observed: Annotated[float, Field(title="Observed")]
    upper: Annotated[float, Field(title="Upper")]


class RerankDocument(BaseModel):
    text: Annotated[str, Field(title="Text")]


class RerankMeta(BaseModel):
    billed_units: Annotated[dict[str, int], Field(title="Billed Units")]


MaxEvalTokens20 = TypeAliasType(
    "MaxEvalTokens20", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Temperature14 = TypeAliasType(
    "Temperature14", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale sampling temperature; default 0 for one sample, 0.7 for several.
"""


TestTimeoutS5 = TypeAliasType(
    "TestTimeoutS5", Annotated[float, Field(gt=0.0, title="Test Timeout S")]
)
"""
Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
"""


class RerankRequest(BaseModel):
    """
    Cohere/Jina rerank shape plus verifier options (`query` is the question).
    """

    aggregation: Annotated[
        Literal["min", "mean", "mean_logit", "last", "prod"], Field(title="Aggregation")
    ] = "mean_logit"
    """
    mean_logit = sigmoid(mean step logit), the default.
    """
    alpha: Annotated[float, Field(ge=0.0, le=1.0, title="Alpha")] = 0.5
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Answer identical judgments (greedy or seeded) from the judgment cache; false scores every judgment afresh.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A probability calibration of this tenant (POST /v1/calibrations) to map the score through; 'none' for the raw read. Unset: the tenant's default for this target, when one is marked and was fitted for this mode and model.
    """
    code_reward: Annotated[Literal["all_pass", "fraction"] | None, Field(title="Code Reward")] = (
        None
    )
    """
    all_pass: 1 only if every case passes; fraction: the share that pass. Default VERIFIER_CODE__REWARD.
    """
    compare: CompareSpec | None = None
    """
    method='compare': how (mode, aggregation, debias, ...); default pairwise with both orders and a Bradley-Terry fit. mode='reasoning' writes a comparison of reasoning_tokens before each read.
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    documents: Annotated[list[str | RerankDocument], Field(min_length=1, title="Documents")]
    language: Annotated[str, Field(title="Language")] = "python"
    """
    The language of the response's code (its last fenced block in that language, else its last untagged block, else the whole response when it has no fence). `python`; `bash` and `nodejs` where the host has them (/v1/models lists code_languages). Assertion cases need python.
    """
    max_eval_tokens: Annotated[MaxEvalTokens20 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    max_steps: Annotated[int, Field(ge=1, title="Max Steps")] = 64
    method: Annotated[Literal["outcome", "process", "fused", "compare"], Field(title="Method")] = (
        "fused"
    )
    """
    final = alpha*outcome + (1-alpha)*process; compare: the responses are compared with each other (docs/methods.md H) and final is each one's compare score.
    """
    mode: Annotated[Literal["direct", "reasoning", "single_pass"], Field(title="Mode")] = "direct"
    """
    Judging mode; with single_pass the outcome part runs direct.
    """
    model: Annotated[str | None, Field(title="Model")] = None
    query: Annotated[str, Field(title="Query")]
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget per judgment (reasoning mode).
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    return_documents: Annotated[bool, Field(title="Return Documents")] = False
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales per judgment; scores are averaged.
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    split: Annotated[Literal["heuristic", "model", "auto"], Field(title="Split")] = "heuristic"
    """
    How `response` is split.
    """
    temperature: Annotated[Temperature14 | None, Field(title="Temperature")] = None
    """
    Rationale sampling temperature; default 0 for one sample, 0.7 for several.
    """
    test_timeout_s: Annotated[TestTimeoutS5 | None, Field(title="Test Timeout S")] = None
    """
    Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
    """
    tests: Annotated[list[CodeCase] | None, Field(title="Tests")] = None
    """
    Test cases the response's code is run against in the sandbox (needs VERIFIER_CODE__ENABLED); the result is decided_by 'code'.
    """
    threshold: Annotated[float, Field(gt=0.0, lt=1.0, title="Threshold")] = 0.5
    """
    First-error threshold.
    """
    top_n: Annotated[int | None, Field(title="Top N")] = None
    verifier: Annotated[Literal["model", "rule", "hybrid"] | None, Field(title="Verifier")] = None
    """
    model: the model judges (with the reference in its prompt, if given); rule: the answer is compared with the reference by rule, no engine call (undecided = score null); hybrid: the rule where it decides, else the model. Default: hybrid with a reference, model without.
    """


Type20 = TypeAliasType("Type20", Annotated[Literal["reward_model"], Field(title="Type")])


class RewardModelSpec(BaseModel):
    """
    The served reward model's score (a sequence RM or PRM on vLLM's pooling runner).
    """

    type: Annotated[Literal["reward_model"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


Model41 = TypeAliasType("Model41", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


ReasoningTokens16 = TypeAliasType(
    "ReasoningTokens16", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Default VERIFIER_REWARD__REASONING_TOKENS.
"""


class RewardRequest(BaseModel):
    """
    POST /get_reward. The last four fields are this service's; unset, the settings apply.
    """

    cache: Annotated[bool, Field(title="Cache")] = True
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A probability calibration of this tenant (POST /v1/calibrations) to map the score through; 'none' for the raw read. Unset: the tenant's default for this target, when one is marked and was fitted for this mode and model.
    """
    compare: CompareSpec | None = None
    """
    method='compare': how (default pairwise, both orders).
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text), for every query.
    """
    labels: Annotated[list[Any] | None, Field(title="Labels")] = None
    """
    Query i's reference (the gold answer or a reference solution): a string or a number; empty or null = none for that query (OpenRLHF sends '' without a label key). A query with a reference is verified `hybrid` unless `verifier` says otherwise. A label that is an object is that query's own verification spec, as /v1/rewards takes it (`{type: ...}`, or `{components, formula}`).
    """
    method: Annotated[Literal["outcome", "compare"], Field(title="Method")] = "outcome"
    """
    outcome: each query judged alone; compare: the queries of one prompt (and one label) compared with each other in one comparison, the reward being each one's compare score (a prompt with one query is judged alone).
    """
    mode: Annotated[Literal["direct", "reasoning"] | None, Field(title="Mode")] = None
    """
    Default VERIFIER_REWARD__MODE.
    """
    model: Annotated[Model41 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    prompts: Annotated[list[str] | None, Field(title="Prompts")] = None
    """
    The prompts, when sent: a query that starts with its prompt is cut there.
    """
    query: Annotated[list[str] | None, Field(title="Query")] = None
    """
    Prompt + response, decoded.
    """
    reasoning_tokens: Annotated[ReasoningTokens16 | None, Field(title="Reasoning Tokens")] = None
    """
    Default VERIFIER_REWARD__REASONING_TOKENS.
    """
    separator: Annotated[str | None, Field(title="Separator")] = None
    """
    Where the response starts (last occurrence); default VERIFIER_REWARD__SEPARATOR, else the chat template's assistant marker.
    """
    verifier: Annotated[Literal["model", "rule", "hybrid"] | None, Field(title="Verifier")] = None
    """
    model | rule | hybrid for every query; default: hybrid for a query with a reference, model without. rule needs every query's label.
    """


DeadlineS1 = TypeAliasType("DeadlineS1", Annotated[float, Field(gt=0.0, title="Deadline S")])
"""
Answer within this many seconds of arrival: what is not decided by then gets `fallback_reward` and `timed_out: true`, and its work is cancelled. Unset: wait for every item (up to VERIFIER_LIMITS__REQUEST_TIMEOUT_S).
"""


Model43 = TypeAliasType("Model43", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


ReasoningTokens18 = TypeAliasType(
    "ReasoningTokens18", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Default VERIFIER_REWARD__REASONING_TOKENS.
"""


Object9 = TypeAliasType("Object9", Annotated[Literal["list"], Field(title="Object")])


class RubricCriterion(BaseModel):
    required: Annotated[bool, Field(title="Required")] = False
    """
    The reward is 0 when this criterion does not hold.
    """
    text: Annotated[str, Field(title="Text")]
    """
    A statement about the response, read as a yes/no question.
    """
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    Its weight; negative for a fault (e.g. -2 for 'contradicts the reference'), which costs reward when present.
    """


ReasoningTokens20 = TypeAliasType(
    "ReasoningTokens20", Annotated[int, Field(ge=1, title="Reasoning Tokens")]
)
"""
Default: the request's reasoning_tokens.
"""


Temperature16 = TypeAliasType(
    "Temperature16", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale temperature; default 0 for one sample, 0.7 for several.
"""


Type21 = TypeAliasType("Type21", Annotated[Literal["rubric"], Field(title="Type")])


class RubricSpec(BaseModel):
    """
    Weighted criteria, each read as P(yes) over one shared prefill of the prompt, the
    response and the reference (docs/methods.md K.3).
    """

    aggregation: Annotated[
        Literal["weighted", "all_required", "min"], Field(title="Aggregation")
    ] = "weighted"
    """
    weighted: Σ weight·P(yes) / Σ positive weights, clipped to [0, 1]; all_required: 1 when every required criterion holds (every criterion when none is marked), else 0; min: the least satisfied criterion. A required criterion that does not hold makes any of them 0.
    """
    criteria: Annotated[list[RubricCriterion], Field(title="Criteria")]
    """
    1 to 64 criteria.
    """
    mode: Annotated[Literal["direct", "reasoning"] | None, Field(title="Mode")] = None
    """
    Default: the request's mode.
    """
    reasoning_tokens: Annotated[ReasoningTokens20 | None, Field(title="Reasoning Tokens")] = None
    """
    Default: the request's reasoning_tokens.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    Shown to the judge with the response.
    """
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales, probabilities averaged (needs mode 'reasoning' here).
    """
    temperature: Annotated[Temperature16 | None, Field(title="Temperature")] = None
    """
    Rationale temperature; default 0 for one sample, 0.7 for several.
    """
    type: Annotated[Literal["rubric"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


class RuleInfo(BaseModel):
    """
    What the rule verifier saw: the answer it extracted, the reference answer, its decision.
    """

    equivalent: Annotated[bool | None, Field(title="Equivalent")]
    """
    null: the rule could not decide (see reason).
    """
    extracted: Annotated[str | None, Field(title="Extracted")]
    """
    The response's final answer, as extracted.
    """
    reason: Annotated[
        Literal[
            "equivalent",
            "not_equivalent",
            "no_answer",
            "unparsable_answer",
            "unparsable_reference",
            "timeout",
            "error",
        ],
        Field(title="Reason"),
    ]
    reference: Annotated[str | None, Field(title="Reference")]
    """
    The reference's answer, as read.
    """


class RunCodeRequest(BaseModel):
    """
    SandboxFusion's ``RunCodeRequest`` (what verl's and ROLL's sandbox clients send).
    """

    code: Annotated[str, Field(title="Code")]
    compile_timeout: Annotated[float, Field(title="Compile Timeout")] = 10.0
    """
    Unused: no compiled language.
    """
    fetch_files: Annotated[list[str] | None, Field(title="Fetch Files")] = None
    """
    Not returned: the scratch directory is gone when the run ends. A request that names files gets a 422.
    """
    files: Annotated[dict[str, str | None] | None, Field(title="Files")] = None
    """
    Path (relative to the scratch directory) -> base64 content, written first.
    """
    language: Annotated[str, Field(title="Language")]
    """
    python (python3 accepted), bash and nodejs (javascript) where present.
    """
    memory_limit_MB: Annotated[int, Field(title="Memory Limit Mb")] = -1
    """
    -1: the setting; lower than VERIFIER_CODE__MEMORY_MB applies.
    """
    run_timeout: Annotated[float, Field(gt=0.0, title="Run Timeout")] = 10.0
    """
    Wall seconds; capped by VERIFIER_CODE__MAX_RUN_TIMEOUT_S.
    """
    stdin: Annotated[str | None, Field(title="Stdin")] = None


class SampleJudgment(BaseModel):
    logit: Annotated[float, Field(title="Logit")]
    rationale: Annotated[str | None, Field(title="Rationale")] = None
    rationale_finish: Annotated[str | None, Field(title="Rationale Finish")] = None
    """
    'verdict' (wrote the marker), 'eos' (ended early) or 'length' (budget ran out).
    """
    rationale_tokens: Annotated[int, Field(title="Rationale Tokens")] = 0
    score: Annotated[float, Field(title="Score")]


Type22 = TypeAliasType("Type22", Annotated[Literal["score"], Field(title="Type")])


class ScoreLevel(BaseModel):
    description: Annotated[str | None, Field(title="Description")] = None
    label: Annotated[str, Field(title="Label")]


class ScoreProbability(BaseModel):
    label: Annotated[str, Field(title="Label")]
    probability: Annotated[float, Field(title="Probability")]
    value: Annotated[int, Field(title="Value")]
    """
    The level's index: 0 for the first level.
    """


class ScoreQuestion(BaseModel):
    """
    Rate the input against ordered levels; level i is read as the digit i.
    """

    instructions: Annotated[
        str | list[Annotated[InputText | InputImage | InputJSON, Field(discriminator="type")]],
        Field(title="Instructions"),
    ]
    levels: Annotated[list[ScoreLevel], Field(title="Levels")]
    name: Annotated[str | None, Field(title="Name")] = None
    """
    Echoed in the answer; unique if given.
    """
    type: Annotated[Literal["score"], Field(title="Type")]


MaxEvalTokens22 = TypeAliasType(
    "MaxEvalTokens22", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model46 = TypeAliasType("Model46", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


Temperature18 = TypeAliasType(
    "Temperature18", Annotated[float, Field(ge=0.0, le=2.0, title="Temperature")]
)
"""
Rationale sampling temperature; default 0 for one sample, 0.7 for several.
"""


TestTimeoutS7 = TypeAliasType(
    "TestTimeoutS7", Annotated[float, Field(gt=0.0, title="Test Timeout S")]
)
"""
Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
"""


class ScoreRequest(BaseModel):
    """
    POST /v1/score: many responses to one question.
    """

    aggregation: Annotated[
        Literal["min", "mean", "mean_logit", "last", "prod"], Field(title="Aggregation")
    ] = "mean_logit"
    """
    mean_logit = sigmoid(mean step logit), the default.
    """
    alpha: Annotated[float, Field(ge=0.0, le=1.0, title="Alpha")] = 0.5
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Answer identical judgments (greedy or seeded) from the judgment cache; false scores every judgment afresh.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A probability calibration of this tenant (POST /v1/calibrations) to map the score through; 'none' for the raw read. Unset: the tenant's default for this target, when one is marked and was fitted for this mode and model.
    """
    code_reward: Annotated[Literal["all_pass", "fraction"] | None, Field(title="Code Reward")] = (
        None
    )
    """
    all_pass: 1 only if every case passes; fraction: the share that pass. Default VERIFIER_CODE__REWARD.
    """
    compare: CompareSpec | None = None
    """
    method='compare': how (mode, aggregation, debias, ...); default pairwise with both orders and a Bradley-Terry fit. mode='reasoning' writes a comparison of reasoning_tokens before each read.
    """
    criteria: Annotated[str | None, Field(title="Criteria")] = None
    """
    What counts as correct (rubric text); shown to the model.
    """
    language: Annotated[str, Field(title="Language")] = "python"
    """
    The language of the response's code (its last fenced block in that language, else its last untagged block, else the whole response when it has no fence). `python`; `bash` and `nodejs` where the host has them (/v1/models lists code_languages). Assertion cases need python.
    """
    max_eval_tokens: Annotated[MaxEvalTokens22 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    max_steps: Annotated[int, Field(ge=1, title="Max Steps")] = 64
    method: Annotated[Literal["outcome", "process", "fused", "compare"], Field(title="Method")] = (
        "fused"
    )
    """
    final = alpha*outcome + (1-alpha)*process; compare: the responses are compared with each other (docs/methods.md H) and final is each one's compare score.
    """
    mode: Annotated[Literal["direct", "reasoning", "single_pass"], Field(title="Mode")] = "direct"
    """
    Judging mode; with single_pass the outcome part runs direct.
    """
    model: Annotated[Model46 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    question: Annotated[str, Field(title="Question")]
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget per judgment (reasoning mode).
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    The gold answer, or a reference solution (its final answer is compared).
    """
    responses: Annotated[list[str], Field(min_length=1, title="Responses")]
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Sampled rationales per judgment; scores are averaged.
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    split: Annotated[Literal["heuristic", "model", "auto"], Field(title="Split")] = "heuristic"
    """
    How `response` is split.
    """
    temperature: Annotated[Temperature18 | None, Field(title="Temperature")] = None
    """
    Rationale sampling temperature; default 0 for one sample, 0.7 for several.
    """
    test_timeout_s: Annotated[TestTimeoutS7 | None, Field(title="Test Timeout S")] = None
    """
    Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S.
    """
    tests: Annotated[list[CodeCase] | None, Field(title="Tests")] = None
    """
    Test cases the response's code is run against in the sandbox (needs VERIFIER_CODE__ENABLED); the result is decided_by 'code'.
    """
    threshold: Annotated[float, Field(gt=0.0, lt=1.0, title="Threshold")] = 0.5
    """
    First-error threshold.
    """
    verifier: Annotated[Literal["model", "rule", "hybrid"] | None, Field(title="Verifier")] = None
    """
    model: the model judges (with the reference in its prompt, if given); rule: the answer is compared with the reference by rule, no engine call (undecided = score null); hybrid: the rule where it decides, else the model. Default: hybrid with a reference, model without.
    """


class ScoreResult(BaseModel):
    code: CodeResult | None = None
    """
    The tests' runs, when sent.
    """
    compare: Annotated[float | None, Field(title="Compare")] = None
    """
    method='compare': the response's compare reward.
    """
    decided_by: Annotated[Literal["rule", "model", "code"] | None, Field(title="Decided By")] = None
    """
    Who decided the outcome part: rule, code or model.
    """
    final: Annotated[float | None, Field(title="Final")]
    """
    The fused score; null only when verifier=rule could not decide (ranked last).
    """
    first_error_step: Annotated[int | None, Field(title="First Error Step")] = None
    index: Annotated[int, Field(title="Index")]
    n_steps: Annotated[int | None, Field(title="N Steps")] = None
    outcome: Annotated[float | None, Field(title="Outcome")] = None
    process: Annotated[float | None, Field(title="Process")] = None
    raw_outcome: Annotated[float | None, Field(title="Raw Outcome")] = None
    """
    The model's raw P(correct) when a calibration mapped `outcome` (and `final`); null otherwise.
    """
    rule: RuleInfo | None = None
    """
    The rule check, when one ran.
    """
    tiebreak: Annotated[float | None, Field(title="Tiebreak")] = None
    """
    verifier 'hybrid' with tests: the model's P(correct), which orders the responses whose tests give the same final.
    """


class SlimeRewardRequest(BaseModel):
    """
    slime's remote reward body, exactly as its ``remote_rm`` posts it.
    """

    label: Annotated[Any | None, Field(title="Label")] = None
    """
    The dataset's label: a gold answer (math: rule, then the judge), a verification spec as /v1/rewards takes it (`{type: ...}`), components (`{components, formula}`), or null (the judge alone).
    """
    prompt: Annotated[str | list[dict[str, Any]], Field(title="Prompt")]
    """
    The prompt: a string (templated or not), or a message list (the last user message is the task).
    """
    response: Annotated[str, Field(title="Response")]
    """
    The generated text.
    """


class SplitInfo(BaseModel):
    fallback_reason: Annotated[str | None, Field(title="Fallback Reason")] = None
    method_used: Annotated[Literal["heuristic", "model", "given"], Field(title="Method Used")]


MaxEvalTokens24 = TypeAliasType(
    "MaxEvalTokens24", Annotated[int, Field(ge=1, title="Max Eval Tokens")]
)
"""
Refuse (or degrade) when the estimate is above this.
"""


Model49 = TypeAliasType("Model49", Annotated[str, Field(max_length=256, title="Model")])
"""
Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
"""


class SplitRequest(BaseModel):
    """
    POST /v1/split.
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    max_eval_tokens: Annotated[MaxEvalTokens24 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    max_steps: Annotated[int, Field(ge=1, title="Max Steps")] = 64
    """
    Above it, adjacent short steps merge.
    """
    method: Annotated[Literal["heuristic", "model", "auto"], Field(title="Method")] = "heuristic"
    """
    heuristic: blank lines and numbered steps; model: the model marks steps with [SPLIT] (checked against the original, else heuristic); auto: model only when the heuristic finds no structure.
    """
    model: Annotated[Model49 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    response: Annotated[str, Field(title="Response")]


class StrategyTag(BaseModel):
    evidence: Annotated[str | None, Field(title="Evidence")] = None
    prob: Annotated[float, Field(title="Prob")]
    value: Annotated[bool, Field(title="Value")]


Type24 = TypeAliasType("Type24", Annotated[Literal["string"], Field(title="Type")])


class StringSpec(BaseModel):
    """
    A string check with OpenAI's ``string_check`` semantics (plus ``contains`` and
    ``regex``); 1 or 0.
    """

    input: Annotated[Literal["response", "answer"], Field(title="Input")] = "response"
    """
    response: the whole response, stripped; answer: its final answer as the rule verifier extracts it (\\boxed{}, ####, ANSWER:, ...; '' when none).
    """
    operation: Annotated[
        Literal["eq", "ne", "like", "contains", "ilike", "regex"],
        Field(title="Operation"),
    ]
    """
    eq / ne: the text equals / differs from reference; like (= contains): reference is a substring; ilike: a substring ignoring case; regex: `pattern` matches somewhere in the text.
    """
    pattern: Annotated[str | None, Field(title="Pattern")] = None
    """
    For regex (Python syntax, the `regex` module), run with a time bound.
    """
    reference: Annotated[str | None, Field(title="Reference")] = None
    """
    For eq, ne, like, contains, ilike.
    """
    type: Annotated[Literal["string"], Field(title="Type")]
    weight: Annotated[float, Field(title="Weight")] = 1.0
    """
    As a component without a formula: its weight in the item's reward (Σ weight·value / Σ positive weights). Not allowed with a formula.
    """


class TaggingSummary(BaseModel):
    label_rates: Annotated[dict[str, float | None], Field(title="Label Rates")]
    n: Annotated[int, Field(title="N")]
    note: Annotated[str, Field(title="Note")]
    regression: Regression


class TracePrediction(BaseModel):
    """
    What a judge predicts from the stripped trace alone.
    """

    agrees: Annotated[bool | None, Field(title="Agrees")]
    """
    The prediction is the letter read at the slot.
    """
    predicted_index: Annotated[int | None, Field(title="Predicted Index")]
    predicted_letter: Annotated[str | None, Field(title="Predicted Letter")]
    probability: Annotated[float | None, Field(title="Probability")]
    """
    The predicted letter's probability.
    """
    trace_empty: Annotated[bool, Field(title="Trace Empty")]
    """
    Nothing was left after stripping: not read.
    """


class Usage(BaseModel):
    cached_judgments: Annotated[int, Field(title="Cached Judgments")] = 0
    """
    Judgments answered from the judgment cache (no tokens spent).
    """
    cached_tokens: Annotated[int, Field(title="Cached Tokens")] = 0
    engine_calls: Annotated[int, Field(title="Engine Calls")] = 0
    generated_tokens: Annotated[int, Field(title="Generated Tokens")] = 0
    prompt_tokens: Annotated[int, Field(title="Prompt Tokens")] = 0
    total_tokens: Annotated[int, Field(title="Total Tokens")] = 0


class ValidationError(BaseModel):
    ctx: Annotated[dict[str, Any] | None, Field(title="Context")] = None
    input: Annotated[Any | None, Field(title="Input")] = None
    loc: Annotated[list[str | int], Field(title="Location")]
    msg: Annotated[str, Field(title="Message")]
    type: Annotated[str, Field(title="Error Type")]


class AuditConditionResult(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    """
    Read from the letter logprobs at the answer slot.
    """
    answer_letter: Annotated[str, Field(title="Answer Letter")]
    correct: Annotated[bool, Field(title="Correct")]
    idk: Annotated[bool, Field(title="Idk")] = False
    inferred_question: InferredQuestion | None = None
    """
    choices_only_reason, with inferred_question: the question the trace reconstructs and whether it matches the real one.
    """
    parse_ok: Annotated[bool | None, Field(title="Parse Ok")] = None
    parsed_index: Annotated[int | None, Field(title="Parsed Index")] = None
    """
    reason: the 'ANSWER: X' letter; null on a parse failure.
    """
    prediction: TracePrediction | None = None
    """
    reason, with predictability: the judge's read of the trace.
    """
    probs: Annotated[list[float], Field(title="Probs")]
    rationale: Annotated[str | None, Field(title="Rationale")] = None


class AuditItemResult(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    conditions: Annotated[dict[str, AuditConditionResult], Field(title="Conditions")]
    id: Annotated[str, Field(title="Id")]
    k: Annotated[int, Field(title="K")]
    perturbations: Annotated[
        dict[str, dict[str, PerturbationResult]] | None, Field(title="Perturbations")
    ] = None
    tags: Annotated[dict[str, StrategyTag] | None, Field(title="Tags")] = None


class Calibration(BaseModel):
    """
    A fitted debiasing method, stored per tenant.
    """

    cost: CalibrationCost
    created_at: Annotated[float, Field(title="Created At")]
    id: Annotated[str, Field(title="Id")]
    items: Annotated[int, Field(title="Items")]
    k: Annotated[int | None, Field(title="K")]
    """
    The option count it applies to (None: any).
    """
    method: Annotated[
        Literal["popdebias", "popdebias_binned", "pride", "contextual"],
        Field(title="Method"),
    ]
    model: Annotated[str, Field(title="Model")]
    name: Annotated[str, Field(title="Name")] = ""
    params: Annotated[dict[str, Any], Field(title="Params")]


class CalibrationList(BaseModel):
    data: Annotated[list[Calibration], Field(title="Data")]


class CalibrationMetrics(BaseModel):
    """
    Binary calibration figures of one set of probabilities against labels.
    """

    auroc: Annotated[float | None, Field(title="Auroc")]
    base_rate: Annotated[float, Field(title="Base Rate")]
    bins: Annotated[list[ReliabilityBin], Field(title="Bins")]
    """
    The reliability bins the ECE is read from.
    """
    brier: Annotated[float | None, Field(title="Brier")]
    ece: Annotated[float | None, Field(title="Ece")]
    """
    Expected calibration error over the equal-mass bins.
    """
    mean_probability: Annotated[float, Field(title="Mean Probability")]
    n: Annotated[int, Field(title="N")]
    nll: Annotated[float | None, Field(title="Nll")]


class CalibrationRequest(BaseModel):
    """
    POST /v1/mcq/calibrations: fit a debiasing method on unlabelled items.
    """

    answers: Annotated[list[int] | None, Field(title="Answers")] = None
    """
    lambda_fit='grid': the index of the right option of each item (labels of the calibration items only).
    """
    bin_edges: Annotated[list[float], Field(title="Bin Edges")] = [0.3, 0.7]
    """
    popdebias_binned: upper edges of the popularity bins.
    """
    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    items: Annotated[list[MCQItem] | None, Field(title="Items")] = None
    """
    Calibration items (no labels). contextual needs none if k is given.
    """
    k: Annotated[K3 | None, Field(title="K")] = None
    """
    contextual without items: the number of options.
    """
    lambda_fit: Annotated[Literal["question_free", "items", "grid"], Field(title="Lambda Fit")] = (
        "question_free"
    )
    """
    popdebias and popdebias_binned: which reads fit the prior (docs/methods.md B.5). question_free: the items with their question hidden, so knowing the answer cannot bend the fit; items: the items as asked, sound only when their distractors are drawn independently of popularity; grid (popdebias only): the lambda in [0, 10] with the best accuracy on the items, needs answers. A fitted lambda below 0 is applied as 0 and reported (lambda_raw, clipped).
    """
    max_eval_tokens: Annotated[MaxEvalTokens4 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    method: Annotated[
        Literal["popdebias", "popdebias_binned", "pride", "contextual"],
        Field(title="Method"),
    ]
    model: Annotated[Model5 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    name: Annotated[str, Field(max_length=200, title="Name")] = ""
    phi: Annotated[Literal["pop", "log"], Field(title="Phi")] = "pop"


class CalibrationResponse(BaseModel):
    budget: BudgetInfo | None = None
    cost: CalibrationCost
    created_at: Annotated[float, Field(title="Created At")]
    id: Annotated[str, Field(title="Id")]
    items: Annotated[int, Field(title="Items")]
    k: Annotated[int | None, Field(title="K")]
    """
    The option count it applies to (None: any).
    """
    method: Annotated[
        Literal["popdebias", "popdebias_binned", "pride", "contextual"],
        Field(title="Method"),
    ]
    model: Annotated[str, Field(title="Model")]
    name: Annotated[str, Field(title="Name")] = ""
    params: Annotated[dict[str, Any], Field(title="Params")]
    usage: Usage


class CheckResult(BaseModel):
    """
    One spec's result.
    """

    code: CodeResult | None = None
    """
    A code spec's tests: passed, total and each case's run.
    """
    criteria: Annotated[list[CriterionResult] | None, Field(title="Criteria")] = None
    """
    A rubric's criteria, in order.
    """
    decided_by: Annotated[
        Literal[
            "rule",
            "model",
            "match",
            "rubric",
            "reward_model",
            "code",
            "weighted",
            "formula",
            "fallback",
        ],
        Field(title="Decided By"),
    ]
    """
    rule: math-verify decided; model: the judge's P(correct); match: a string or choice check; rubric: the criteria's aggregate; reward_model: the served RM; code: the tests run in the sandbox; weighted / formula: the components combined; fallback: timed out or failed.
    """
    extracted: Annotated[str | None, Field(title="Extracted")] = None
    """
    What a rule, string or choice check read from the response.
    """
    failed: Annotated[str | None, Field(title="Failed")] = None
    """
    Why it could not be decided (an engine error, a formula that divided by zero, a pattern over its time bound).
    """
    reason: Annotated[str | None, Field(title="Reason")] = None
    """
    Why a rule check decided as it did (e.g. no_answer).
    """
    reward: Annotated[float, Field(title="Reward")]
    score: Annotated[float | None, Field(title="Score")] = None
    """
    The judge's raw P(correct), where a model read decided.
    """
    timed_out: Annotated[bool, Field(title="Timed Out")] = False
    """
    Not decided by deadline_s.
    """


class ChoiceAnswer(BaseModel):
    choice: Annotated[str | bool, Field(title="Choice")]
    confidence: Annotated[float, Field(title="Confidence")]
    """
    The probability of the chosen value.
    """
    name: Annotated[str | None, Field(title="Name")] = None
    passes: Annotated[int, Field(title="Passes")] = 1
    """
    Extension: the reads averaged (cyclic orders of the choices x samples).
    """
    probabilities: Annotated[list[ChoiceProbability], Field(title="Probabilities")]
    """
    One per choice, in their order.
    """
    raw_probabilities: Annotated[
        list[ChoiceProbability] | None, Field(title="Raw Probabilities")
    ] = None
    """
    Extension: the raw read when a calibration mapped `probabilities`.
    """
    type: Annotated[Literal["choice"], Field(title="Type")] = "choice"


class ChoiceQuestion(BaseModel):
    """
    Choose from the supplied options; read as the letters A, B, ... in the given order.
    """

    choices: Annotated[list[ChoiceOption], Field(title="Choices")]
    instructions: Annotated[
        str | list[Annotated[InputText | InputImage | InputJSON, Field(discriminator="type")]],
        Field(title="Instructions"),
    ]
    name: Annotated[str | None, Field(title="Name")] = None
    """
    Echoed in the answer; unique if given.
    """
    type: Annotated[Literal["choice"], Field(title="Type")]


class ClassificationResponse(BaseModel):
    budget: BudgetInfo | None = None
    created: Annotated[int | None, Field(title="Created")] = None
    data: Annotated[list[ClassificationData], Field(title="Data")]
    id: Annotated[str | None, Field(title="Id")] = None
    model: Annotated[str, Field(title="Model")]
    object: Annotated[str, Field(title="Object")] = "list"
    usage: PoolingUsage


class CompareResponse(BaseModel):
    aggregation: Annotated[
        Literal["bradley_terry", "win_rate", "mean_probability"],
        Field(title="Aggregation"),
    ]
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The calibration `preferences` went through; null: none.
    """
    debias: Annotated[Literal["swap", "permute", "pride", "none"], Field(title="Debias")]
    first_position_rate: Annotated[float | None, Field(title="First Position Rate")]
    """
    The mean probability of the first letter shown (no position bias: 1/2 pairwise, 1/n listwise), before PriDe.
    """
    mode: Annotated[Literal["pairwise", "listwise"], Field(title="Mode")]
    model: Annotated[str, Field(title="Model")]
    passes: Annotated[int, Field(title="Passes")]
    """
    Reads made (orders x samples).
    """
    position_consistency: Annotated[float | None, Field(title="Position Consistency")]
    """
    The share of pairs whose preferred response is the same in every order read; null when each pair was read in one order only.
    """
    preferences: Annotated[list[list[float | None]], Field(title="Preferences")]
    """
    preferences[i][j]: P(response i preferred over j), the mean over the reads showing both (listwise: p_i / (p_i + p_j)); [i][j] + [j][i] = 1; the diagonal is null.
    """
    ranking: Annotated[list[int], Field(title="Ranking")]
    """
    Indices best first; ties by lowest index.
    """
    raw_preferences: Annotated[list[list[float | None]] | None, Field(title="Raw Preferences")] = (
        None
    )
    """
    The raw preference matrix when a calibration mapped `preferences`; else null.
    """
    reads: Annotated[list[CompareRead] | None, Field(title="Reads")] = None
    results: Annotated[list[CompareResult], Field(title="Results")]
    """
    One per response, in request order.
    """
    usage: Usage


class ConditionSummary(BaseModel):
    accuracy: Annotated[float | None, Field(title="Accuracy")]
    accuracy_parsed: Annotated[float | None, Field(title="Accuracy Parsed")] = None
    chance: Annotated[float | None, Field(title="Chance")]
    disagreement_rate: Annotated[float | None, Field(title="Disagreement Rate")] = None
    idk_rate: Annotated[float | None, Field(title="Idk Rate")]
    mean_prob_gold: Annotated[float | None, Field(title="Mean Prob Gold")]
    n: Annotated[int, Field(title="N")]
    parse_failure_rate: Annotated[float | None, Field(title="Parse Failure Rate")] = None
    predictability: PredictabilityModel | None = None


class CustomToolCallOutput(BaseModel):
    call_id: Annotated[str, Field(title="Call Id")]
    id: Annotated[str | None, Field(title="Id")] = None
    output: Annotated[
        str | list[Annotated[InputText | InputImage, Field(discriminator="type")]],
        Field(title="Output"),
    ]
    status: Annotated[
        Literal["in_progress", "completed", "incomplete"] | None, Field(title="Status")
    ] = None
    type: Annotated[Literal["custom_tool_call_output"], Field(title="Type")]


class DecisionUsage(BaseModel):
    """
    OpenAI's usage fields, then this service's (every route reports the latter).
    """

    cached_judgments: Annotated[int, Field(title="Cached Judgments")] = 0
    """
    Judgments answered from the judgment cache (no tokens spent).
    """
    cached_tokens: Annotated[int, Field(title="Cached Tokens")] = 0
    engine_calls: Annotated[int, Field(title="Engine Calls")] = 0
    generated_tokens: Annotated[int, Field(title="Generated Tokens")] = 0
    input_tokens: Annotated[int, Field(title="Input Tokens")] = 0
    input_tokens_details: InputTokensDetails | None = None
    output_tokens: Annotated[int, Field(title="Output Tokens")] = 0
    output_tokens_details: OutputTokensDetails | None = None
    prompt_tokens: Annotated[int, Field(title="Prompt Tokens")] = 0
    total_tokens: Annotated[int, Field(title="Total Tokens")] = 0


class FunctionCallOutput(BaseModel):
    call_id: Annotated[str, Field(title="Call Id")]
    id: Annotated[str | None, Field(title="Id")] = None
    output: Annotated[
        str | list[Annotated[InputText | InputImage, Field(discriminator="type")]],
        Field(title="Output"),
    ]
    status: Annotated[
        Literal["in_progress", "completed", "incomplete"] | None, Field(title="Status")
    ] = None
    type: Annotated[Literal["function_call_output"], Field(title="Type")]


class HTTPValidationError(BaseModel):
    detail: Annotated[list[ValidationError] | None, Field(title="Detail")] = None


class InferredSummary(BaseModel):
    """
    The inferred-question match over the choices_only_reason traces (docs/methods.md C.3).
    """

    correct: MatchRate
    """
    Among traces whose answer is right.
    """
    incorrect: MatchRate
    """
    Among traces whose answer is wrong.
    """
    inferred_rate: Annotated[float, Field(title="Inferred Rate")]
    n: Annotated[int, Field(title="N")]
    """
    Traces read.
    """
    n_inferred: Annotated[int, Field(title="N Inferred")]
    """
    Traces that infer a question.
    """


class MCQAnswerResponse(BaseModel):
    answer_index: Annotated[int, Field(title="Answer Index")]
    answer_letter: Annotated[str, Field(title="Answer Letter")]
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The probability calibration `probs` went through; null: none.
    """
    debias: DebiasInfo
    model: Annotated[str, Field(title="Model")]
    popularity: Annotated[list[float] | None, Field(title="Popularity")] = None
    """
    The popularity used.
    """
    probs: Annotated[list[float], Field(title="Probs")]
    """
    After debiasing (= probs_raw for 'none').
    """
    probs_raw: Annotated[list[float], Field(title="Probs Raw")]
    """
    Softmax over the K option letters.
    """
    uncalibrated_probs: Annotated[list[float] | None, Field(title="Uncalibrated Probs")] = None
    """
    `probs` before a probability calibration mapped them (after debiasing); null when none did.
    """
    usage: Usage


class MCQBatchRequest(BaseModel):
    """
    POST /v1/mcq/answer/batch: many items, one engine batch, one debiasing setting.
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    A debiasing calibration of this tenant (cal_..., POST /v1/mcq/calibrations) for pride, popdebias or contextual; or a probability calibration (pcal_..., POST /v1/calibrations, target 'mcq') that maps `probs` through its temperature; 'none' for the raw read. Unset: the tenant's default mcq calibration, when one is marked and was fitted for this model.
    """
    debias: Annotated[
        Literal["none", "popdebias", "pride", "contextual"], Field(title="Debias")
    ] = "none"
    """
    popdebias: remove a popularity prior (needs popularity and a calibration or popdebias_lambda); pride: remove an option-letter prior (needs a calibration); contextual: divide by the letter probabilities on content-free inputs.
    """
    items: Annotated[list[MCQItem], Field(min_length=1, title="Items")]
    max_eval_tokens: Annotated[MaxEvalTokens12 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    model: Annotated[Model19 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    phi: Annotated[Literal["pop", "log"], Field(title="Phi")] = "pop"
    """
    PopDebias phi(pop): pop or log(pop).
    """
    popdebias_lambda: Annotated[float | None, Field(title="Popdebias Lambda")] = None
    """
    PopDebias lambda to use without a calibration.
    """


class MCQBatchResponse(BaseModel):
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The probability calibration every result's `probs` went through; null: none.
    """
    model: Annotated[str, Field(title="Model")]
    results: Annotated[list[MCQAnswer], Field(title="Results")]
    usage: Usage


class Message(BaseModel):
    """
    A user, developer, system or assistant message (one model: the role decides its parts).
    """

    content: Annotated[
        str
        | list[
            Annotated[
                InputText | InputImage | InputJSON | OutputText | RefusalPart,
                Field(discriminator="type"),
            ]
        ],
        Field(title="Content"),
    ]
    phase: Annotated[Literal["commentary", "final_answer"] | None, Field(title="Phase")] = None
    role: Annotated[Literal["user", "developer", "system", "assistant"], Field(title="Role")]
    type: Annotated[Literal["message"], Field(title="Type")] = "message"


class OpenRecall(BaseModel):
    items: Annotated[list[OpenRecallItem], Field(title="Items")]
    known_rate: Annotated[float | None, Field(title="Known Rate")]
    known_rate_se: Annotated[float | None, Field(title="Known Rate Se")]
    max_tokens: Annotated[int, Field(title="Max Tokens")]
    n: Annotated[int, Field(title="N")]
    """
    Questions asked (every item of the request).
    """
    n_known: Annotated[int, Field(title="N Known")]
    n_scored_known: Annotated[int, Field(title="N Scored Known")]
    """
    Known questions among the scored ones.
    """


class OutcomeResponse(BaseModel):
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The calibration `score` went through; null: none.
    """
    code: CodeResult | None = None
    """
    The tests' runs, when sent.
    """
    decided_by: Annotated[Literal["rule", "model", "code"] | None, Field(title="Decided By")] = None
    """
    rule, code (the tests) or model; null when verifier=rule could not decide.
    """
    logit: Annotated[float | None, Field(title="Logit")]
    """
    logp('1') - logp('0'); for several samples logit(score); null when no model judged.
    """
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")]
    model: Annotated[str, Field(title="Model")]
    rationale: Annotated[str | None, Field(title="Rationale")] = None
    raw_score: Annotated[float | None, Field(title="Raw Score")] = None
    """
    The model's raw probability, sigmoid(logit), when a calibration mapped `score`; null otherwise (then `score` is the raw read).
    """
    reward: Annotated[float | None, Field(title="Reward")] = None
    """
    A pooling reward model's reward (a one-logit head's value; with classes, the positive class's log-odds); null on a generative judge.
    """
    rule: RuleInfo | None = None
    """
    The rule check, when one ran.
    """
    samples: Annotated[list[SampleJudgment] | None, Field(title="Samples")] = None
    score: Annotated[float | None, Field(title="Score")]
    """
    P(correct) = sigmoid(logit), through the calibration when one applies (then raw_score holds sigmoid(logit)); a rule decision is 1 or 0; null when verifier=rule could not decide.
    """
    usage: Usage
    verdict: Annotated[int | None, Field(title="Verdict")]
    """
    1 if score >= 0.5 else 0 (the calibrated score, when calibrated); null with the score.
    """


class PoolItem(BaseModel):
    aliases: Annotated[list[str], Field(max_length=16, title="Aliases")] = []
    """
    Other names of the answer that open recall accepts (e.g. 'Van Gogh').
    """
    answer: PoolOption
    candidates: Annotated[list[PoolOption], Field(max_length=64, min_length=1, title="Candidates")]
    id: Annotated[str, Field(max_length=200, title="Id")] = ""
    question: Annotated[str, Field(title="Question")]


class PoolingResponse(BaseModel):
    budget: BudgetInfo | None = None
    created: Annotated[int | None, Field(title="Created")] = None
    data: Annotated[list[PoolingResponseData], Field(title="Data")]
    id: Annotated[str | None, Field(title="Id")] = None
    model: Annotated[str, Field(title="Model")]
    object: Annotated[str, Field(title="Object")] = "list"
    usage: PoolingUsage


class PopMCQRequest(BaseModel):
    """
    POST /v1/mcq/popmcq: build S1-S6 from candidate pools, answer, debias, measure.
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    calibration_ratio: Annotated[float, Field(gt=0.0, lt=1.0, title="Calibration Ratio")] = 0.2
    """
    Share of the kept questions that fit popdebias and pride; they are excluded from the scored items.
    """
    items: Annotated[list[PoolItem], Field(min_length=2, title="Items")]
    lambda_fit: Annotated[Literal["question_free", "items", "grid"], Field(title="Lambda Fit")] = (
        "question_free"
    )
    """
    How popdebias fits lambda on the calibration split (docs/methods.md B.5). question_free (label-free): S1-S5 items with their question hidden, so knowing the answer cannot bend the fit; items (label-free): the S1 items as asked, whose distractors are drawn independently of popularity; grid: the lambda in [0, 10] with the best accuracy on the calibration items (uses their labels). A fitted lambda below 0 is applied as 0 and reported (lambda_raw, clipped).
    """
    max_eval_tokens: Annotated[MaxEvalTokens16 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    methods: Annotated[
        list[Literal["none", "popdebias", "pride", "contextual"]],
        Field(min_length=1, title="Methods"),
    ] = ["none", "popdebias", "pride", "contextual"]
    model: Annotated[Model28 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    open_recall: Annotated[bool, Field(title="Open Recall")] = False
    """
    First ask every question without options (free form, greedy) and mark it known when the answer or an alias appears in the reply and no wrong candidate does (docs/methods.md B.8); table_known repeats the table on the known questions.
    """
    open_recall_tokens: Annotated[int, Field(ge=4, le=128, title="Open Recall Tokens")] = 24
    """
    Token budget of each open-recall answer.
    """
    paper_filter: Annotated[bool, Field(title="Paper Filter")] = True
    """
    Keep only questions with >= 4 distinct wrong candidates on which S1, S2 and S6 can all be built (docs/methods.md B.1).
    """
    phi: Annotated[Literal["pop", "log"], Field(title="Phi")] = "pop"
    popularity: Annotated[Literal["given", "model"], Field(title="Popularity")] = "model"
    """
    given: every answer and candidate carries its popularity in [0, 1]; model: the question-free mean log-probability of each text, min-max normalised over the question's pool (a proxy the service computes, not page views).
    """
    return_items: Annotated[bool, Field(title="Return Items")] = False
    seed: Annotated[int, Field(title="Seed")] = 0
    strategies: Annotated[
        list[Literal["S1", "S2", "S3", "S4", "S5", "S6"]],
        Field(min_length=1, title="Strategies"),
    ] = ["S1", "S2", "S3", "S4", "S5", "S6"]


class PopMCQResponse(BaseModel):
    budget: BudgetInfo | None = None
    built: Annotated[dict[str, int], Field(title="Built")]
    calibration: Annotated[dict[str, dict[str, Any]], Field(title="Calibration")]
    calibration_ids: Annotated[list[str], Field(title="Calibration Ids")]
    """
    Questions held out to fit the methods.
    """
    dropped: Annotated[list[dict[str, str]], Field(title="Dropped")]
    items: Annotated[list[PopMCQBuiltItem] | None, Field(title="Items")] = None
    model: Annotated[str, Field(title="Model")]
    n_calibration: Annotated[int, Field(title="N Calibration")]
    n_items: Annotated[int, Field(title="N Items")]
    n_kept: Annotated[int, Field(title="N Kept")]
    n_scored: Annotated[int, Field(title="N Scored")]
    open_recall: OpenRecall | None = None
    skipped: Annotated[dict[str, int], Field(title="Skipped")]
    table: Annotated[dict[str, dict[str, PopMCQCell]], Field(title="Table")]
    """
    method -> strategy -> metrics
    """
    table_known: Annotated[dict[str, dict[str, PopMCQCell]] | None, Field(title="Table Known")] = (
        None
    )
    """
    The table on the questions open recall found known.
    """
    usage: Usage


class ProcessResponse(BaseModel):
    aggregate: Annotated[float, Field(title="Aggregate")]
    aggregation: Annotated[
        Literal["min", "mean", "mean_logit", "last", "prod"], Field(title="Aggregation")
    ]
    budget: BudgetInfo | None = None
    early_stopped: Annotated[bool, Field(title="Early Stopped")] = False
    exact_fallbacks: Annotated[int | None, Field(title="Exact Fallbacks")] = None
    """
    single_pass: slots re-scored exactly because a label was outside top-k.
    """
    first_error_step: Annotated[int, Field(title="First Error Step")]
    """
    0-based first step below threshold; -1 if none.
    """
    mode: Annotated[Literal["direct", "reasoning", "single_pass"], Field(title="Mode")]
    model: Annotated[str, Field(title="Model")]
    split: SplitInfo
    step_logits: Annotated[list[float], Field(title="Step Logits")]
    step_samples: Annotated[list[list[SampleJudgment]] | None, Field(title="Step Samples")] = None
    step_scores: Annotated[list[float], Field(title="Step Scores")]
    steps: Annotated[list[str], Field(title="Steps")]
    threshold: Annotated[float, Field(title="Threshold")]
    usage: Usage


class RerankResult(BaseModel):
    code: CodeResult | None = None
    decided_by: Annotated[Literal["rule", "model", "code"] | None, Field(title="Decided By")] = None
    document: RerankDocument | None = None
    index: Annotated[int, Field(title="Index")]
    raw_score: Annotated[float | None, Field(title="Raw Score")] = None
    """
    The model's raw P(correct) when a calibration mapped relevance_score (method='outcome'); absent otherwise.
    """
    relevance_score: Annotated[float, Field(title="Relevance Score")]
    """
    The final score (0 when verifier=rule could not decide: ranked last).
    """
    rule: RuleInfo | None = None
    tiebreak: Annotated[float | None, Field(title="Tiebreak")] = None
    """
    verifier 'hybrid' with tests: the model's P(correct), which orders documents of equal pass rate.
    """


class RewardItem(BaseModel):
    """
    One sample: its prompt and response, and how to verify it.
    """

    components: Annotated[
        dict[
            str,
            MathSpec
            | ChoiceSpec
            | StringSpec
            | ModelSpec
            | RubricSpec
            | CodeSpec
            | RewardModelSpec,
        ]
        | None,
        Field(title="Components"),
    ] = None
    """
    1-16 named specs (names are identifiers); the reward is their weighted mean, or `formula`'s value.
    """
    formula: Annotated[str | None, Field(title="Formula")] = None
    """
    With components: an expression over their names, e.g. '0.8 * correct + 0.2 * format'; + - * / ** ^ (a power), parentheses, and min, max, abs, clip, floor, ceil, exp, sqrt, log. Nothing else is allowed.
    """
    id: Annotated[str | None, Field(title="Id")] = None
    """
    Echoed in its result.
    """
    prompt: Annotated[str, Field(title="Prompt")]
    """
    The task the response answers.
    """
    response: Annotated[str, Field(title="Response")]
    """
    The response under verification (an empty one gets 0 from a model read).
    """
    verifier: Annotated[
        MathSpec
        | ChoiceSpec
        | StringSpec
        | ModelSpec
        | RubricSpec
        | CodeSpec
        | RewardModelSpec
        | None,
        Field(title="Verifier"),
    ] = None
    """
    One spec for the whole reward; or send `components`.
    """


class RewardResponse(BaseModel):
    calibration: CalibrationInfo | None = None
    """
    The calibration the model-decided scores went through (then extra_logs.model_score holds the raw ones); null: raw.
    """
    extra_logs: Annotated[dict[str, list[float]] | None, Field(title="Extra Logs")] = None
    """
    Per query: `verifier_logit` (the model's logp('1') - logp('0'); +-1e4 for a rule decision or an empty response; 0 undecided), `decided_by_rule` (1/0), `decided_by_model` (1/0), `rule_equivalent` (1/0; 0 also when undecided), `model_score` (the model's raw P(correct) where it judged, 0 where it did not); with a spec label, `decided_by_spec` (1/0; verifier_logit 0 for those queries).
    """
    rewards: Annotated[list[float], Field(title="Rewards")]
    """
    P(correct) of each response (= scores); a rule decision is 1 or 0; an undecided rule-only check 0 (see extra_logs). A query decided by its own spec label gets that spec's reward, which a formula or a reward model may take outside [0, 1].
    """
    scores: Annotated[list[float], Field(title="Scores")]
    """
    P(correct) in [0, 1] (a spec's reward, clipped).
    """
    usage: Usage | None = None


class RewardResult(BaseModel):
    """
    One item's result: ``reward`` is what a trainer uses; with components, each one's value
    and details too.
    """

    code: CodeResult | None = None
    """
    A code spec's tests: passed, total and each case's run.
    """
    components: Annotated[dict[str, CheckResult] | None, Field(title="Components")] = None
    criteria: Annotated[list[CriterionResult] | None, Field(title="Criteria")] = None
    """
    A rubric's criteria, in order.
    """
    decided_by: Annotated[
        Literal[
            "rule",
            "model",
            "match",
            "rubric",
            "reward_model",
            "code",
            "weighted",
            "formula",
            "fallback",
        ],
        Field(title="Decided By"),
    ]
    """
    rule: math-verify decided; model: the judge's P(correct); match: a string or choice check; rubric: the criteria's aggregate; reward_model: the served RM; code: the tests run in the sandbox; weighted / formula: the components combined; fallback: timed out or failed.
    """
    extracted: Annotated[str | None, Field(title="Extracted")] = None
    """
    What a rule, string or choice check read from the response.
    """
    failed: Annotated[str | None, Field(title="Failed")] = None
    """
    Why it could not be decided (an engine error, a formula that divided by zero, a pattern over its time bound).
    """
    id: Annotated[str | None, Field(title="Id")] = None
    index: Annotated[int, Field(title="Index")]
    reason: Annotated[str | None, Field(title="Reason")] = None
    """
    Why a rule check decided as it did (e.g. no_answer).
    """
    reward: Annotated[float, Field(title="Reward")]
    reward_components: Annotated[dict[str, float] | None, Field(title="Reward Components")] = None
    """
    Each component's value by name (components only); a timed-out or failed component holds fallback_reward.
    """
    score: Annotated[float | None, Field(title="Score")] = None
    """
    The judge's raw P(correct), where a model read decided.
    """
    timed_out: Annotated[bool, Field(title="Timed Out")] = False
    """
    Not decided by deadline_s.
    """


class RewardsRequest(BaseModel):
    """
    POST /v1/rewards.
    """

    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Answer repeated judgments from the cache.
    """
    deadline_s: Annotated[DeadlineS1 | None, Field(title="Deadline S")] = None
    """
    Answer within this many seconds of arrival: what is not decided by then gets `fallback_reward` and `timed_out: true`, and its work is cancelled. Unset: wait for every item (up to VERIFIER_LIMITS__REQUEST_TIMEOUT_S).
    """
    fallback_reward: Annotated[float, Field(title="Fallback Reward")] = 0.0
    """
    The reward of an item that timed out or failed (always flagged).
    """
    items: Annotated[list[RewardItem], Field(title="Items")]
    """
    The samples, each with its own verifier; results come back in order.
    """
    mode: Annotated[Literal["direct", "reasoning"] | None, Field(title="Mode")] = None
    """
    How model-read specs judge; default VERIFIER_REWARD__MODE.
    """
    model: Annotated[Model43 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    reasoning_tokens: Annotated[ReasoningTokens18 | None, Field(title="Reasoning Tokens")] = None
    """
    Default VERIFIER_REWARD__REASONING_TOKENS.
    """


class RewardsResponse(BaseModel):
    budget: BudgetInfo | None = None
    failed: Annotated[int, Field(title="Failed")] = 0
    """
    Items that failed.
    """
    model: Annotated[str, Field(title="Model")]
    object: Annotated[Literal["list"], Field(title="Object")] = "list"
    results: Annotated[list[RewardResult], Field(title="Results")]
    timed_out: Annotated[int, Field(title="Timed Out")] = 0
    """
    Items that timed out.
    """
    usage: Usage


class RunCodeResponse(BaseModel):
    """
    SandboxFusion's ``RunCodeResponse``; ``usage`` counts no engine tokens.
    """

    budget: BudgetInfo | None = None
    compile_result: CommandRunResult | None = None
    executor_pod_name: Annotated[str | None, Field(title="Executor Pod Name")] = None
    files: Annotated[dict[str, str] | None, Field(title="Files")] = None
    message: Annotated[str, Field(title="Message")] = ""
    run_result: CommandRunResult | None = None
    status: Annotated[Literal["Success", "Failed", "SandboxError"], Field(title="Status")]
    usage: Usage


class ScoreAnswer(BaseModel):
    confidence: Annotated[float, Field(title="Confidence")]
    """
    The probability of the most likely level.
    """
    name: Annotated[str | None, Field(title="Name")] = None
    probabilities: Annotated[list[ScoreProbability], Field(title="Probabilities")]
    raw_probabilities: Annotated[
        list[ScoreProbability] | None, Field(title="Raw Probabilities")
    ] = None
    """
    Extension: the raw read when a calibration mapped `probabilities`.
    """
    raw_score: Annotated[float | None, Field(title="Raw Score")] = None
    """
    Extension: `score` of the raw read, when calibrated.
    """
    score: Annotated[float, Field(title="Score")]
    """
    The expected level index, sum of value * probability.
    """
    type: Annotated[Literal["score"], Field(title="Type")] = "score"


class ScoreResponse(BaseModel):
    alpha: Annotated[float, Field(title="Alpha")]
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The calibration the outcome scores went through (method='outcome'); the ranking is the raw one (the map is monotone).
    """
    comparison: CompareSummary | None = None
    """
    method='compare': the comparison behind the finals.
    """
    method: Annotated[Literal["outcome", "process", "fused", "compare"], Field(title="Method")]
    model: Annotated[str, Field(title="Model")]
    ranking: Annotated[list[int], Field(title="Ranking")]
    """
    Indices best first; ties by lowest index.
    """
    results: Annotated[list[ScoreResult], Field(title="Results")]
    tie_tolerance: Annotated[float, Field(title="Tie Tolerance")] = 0.0
    """
    Scores closer than this are tied (the engine's precision).
    """
    ties: Annotated[list[list[int]], Field(title="Ties")] = []
    """
    Groups of indices, in ranking order, whose scores chain within tie_tolerance: the engine cannot order them (equal scores go by lowest index).
    """
    usage: Usage


class SplitResponse(BaseModel):
    budget: BudgetInfo | None = None
    fallback_reason: Annotated[str | None, Field(title="Fallback Reason")] = None
    method_used: Annotated[Literal["heuristic", "model", "given"], Field(title="Method Used")]
    steps: Annotated[list[str], Field(title="Steps")]
    usage: Usage | None = None


class AuditSummary(BaseModel):
    artifact_threshold: Annotated[float, Field(title="Artifact Threshold")]
    artifacts: Annotated[list[Artifact], Field(title="Artifacts")]
    conditions: Annotated[dict[str, ConditionSummary], Field(title="Conditions")]
    inferred_question: InferredSummary | None = None
    n_items: Annotated[int, Field(title="N Items")]
    perturbations: Annotated[
        dict[str, dict[str, PerturbationSummary]], Field(title="Perturbations")
    ]
    reasoning_effect: Annotated[dict[str, ReasoningEffect], Field(title="Reasoning Effect")]
    tagging: TaggingSummary | None = None


class CalibrationFit(BaseModel):
    """
    The fitted map's figures beside the raw read's.
    """

    calibrated: CalibrationMetrics
    raw: CalibrationMetrics


class DecisionExample(BaseModel):
    """
    One labelled decision: the input and questions a /v1/decisions request sends, and the
    correct value of each question (``null``: not labelled, read but not fitted).
    """

    answers: Annotated[list[bool | int | str | None], Field(title="Answers")]
    """
    One per question: a predicate's true or false; a choice's value (typed, as in `choices`); a score's level label or its index.
    """
    input: Annotated[
        str
        | list[Message | FunctionCall | FunctionCallOutput | CustomToolCall | CustomToolCallOutput],
        Field(title="Input"),
    ]
    questions: Annotated[
        list[
            Annotated[
                PredicateQuestion | ChoiceQuestion | ScoreQuestion,
                Field(discriminator="type"),
            ]
        ],
        Field(title="Questions"),
    ]


class DecisionRequest(BaseModel):
    """
    POST /v1/decisions (the SDK's ``DecisionCreateParams``, then this service's options).
    """

    budget_policy: Annotated[Literal["refuse", "degrade"], Field(title="Budget Policy")] = "refuse"
    """
    refuse: 422 budget_too_small; degrade: lower reasoning to direct, one sample.
    """
    calibration_id: Annotated[str | None, Field(title="Calibration Id")] = None
    """
    Extension. An MCQ prior of this tenant (cal_..., POST /v1/mcq/calibrations) for debias 'pride' or 'contextual'; or a probability calibration (pcal_..., POST /v1/calibrations, target 'decisions') that maps every answer's probabilities through its question type's temperature; 'none' for the raw read. Unset: the tenant's default decisions calibration, when one is marked and was fitted for this mode and model.
    """
    debias: Annotated[Literal["none", "pride", "contextual"], Field(title="Debias")] = "none"
    """
    Extension, choice questions: remove the letter-label prior from every read (docs/methods.md F.4). pride: with a PriDe calibration (calibration_id) fitted for the question's number of choices; contextual: divide by the letter probabilities of content-free reads in this prompt format (3 more reads per number of choices), or by a stored contextual calibration's.
    """
    input: Annotated[
        str
        | list[Message | FunctionCall | FunctionCallOutput | CustomToolCall | CustomToolCallOutput],
        Field(title="Input"),
    ]
    """
    A text, or an ordered list of messages, function calls and their outputs, custom tool calls and their outputs (an agent's trajectory).
    """
    max_eval_tokens: Annotated[MaxEvalTokens8 | None, Field(title="Max Eval Tokens")] = None
    """
    Refuse (or degrade) when the estimate is above this.
    """
    min_label_probability: Annotated[
        float, Field(ge=0.0, le=1.0, title="Min Label Probability")
    ] = 0.0
    """
    Extension: a question whose labels get less total probability than this at the answer slot (the model wanted to say something else) is answered with a refusal. 0: never.
    """
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")] = "direct"
    """
    Extension. direct: read each question's labels at once; reasoning: the model first thinks within reasoning_tokens, then its labels are read after 'Answer:' (docs/methods.md F.5).
    """
    model: Annotated[str, Field(max_length=256, title="Model")]
    """
    Any name without ':': the served model answers. '<served name>:<adapter>': that LoRA adapter of it; another name with ':' is a 404 model_not_found.
    """
    permutations: Annotated[int, Field(ge=1, le=26, title="Permutations")] = 1
    """
    Extension, choice questions: read each under this many cyclic orders of its choices (at most one per choice) and average each value's probability over them (docs/methods.md F.3). Each answer's `passes` says how many reads it averages.
    """
    prompt_cache_key: Annotated[str | None, Field(title="Prompt Cache Key")] = None
    """
    Accepted; vLLM's prefix cache matches by content.
    """
    prompt_cache_options: PromptCacheOptions | None = None
    questions: Annotated[
        list[
            Annotated[
                PredicateQuestion | ChoiceQuestion | ScoreQuestion,
                Field(discriminator="type"),
            ]
        ],
        Field(title="Questions"),
    ]
    """
    1-64 predicate, choice or score questions; answers come back in the same order.
    """
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Extension: the thinking budget per read (reasoning).
    """
    safety_identifier: Annotated[str | None, Field(title="Safety Identifier")] = None
    """
    Accepted, not used.
    """
    samples: Annotated[int, Field(ge=1, title="Samples")] = 1
    """
    Extension: sampled thoughts per read (reasoning); probabilities averaged.
    """
    seed: Annotated[int | None, Field(title="Seed")] = None
    """
    Base seed; sample i uses seed + i.
    """
    temperature: Annotated[Temperature4 | None, Field(title="Temperature")] = None
    """
    Thinking temperature; default 0 for one sample, 0.7 for several.
    """


class DecisionResponse(BaseModel):
    answers: Annotated[
        list[
            Annotated[
                PredicateAnswer | ChoiceAnswer | ScoreAnswer | RefusalAnswer,
                Field(discriminator="type"),
            ]
        ],
        Field(title="Answers"),
    ]
    """
    In question order.
    """
    budget: BudgetInfo | None = None
    calibration: DecisionCalibrationInfo | None = None
    """
    Extension: the probability calibration the answers went through (each answer of a fitted type carries its raw read beside); null: raw reads.
    """
    model: Annotated[str, Field(title="Model")]
    usage: DecisionUsage


class ProbabilityCalibrationRequest(BaseModel):
    """
    POST /v1/calibrations: read the judge on labelled examples through the ordinary serving
    path (the prompts a later request with the same mode and budget uses), fit, store.
    """

    bins: Annotated[int, Field(ge=2, le=50, title="Bins")] = 10
    """
    Equal-mass bins of the ECE.
    """
    cache: Annotated[bool, Field(title="Cache")] = True
    """
    Read through the judgment cache.
    """
    default: Annotated[bool, Field(title="Default")] = False
    """
    Make it this tenant's default for its target: applied to every answer of that target that names no calibration_id.
    """
    examples: Annotated[
        list[OutcomeExample | CompareExample | DecisionExample | MCQExample],
        Field(min_length=8, title="Examples"),
    ]
    """
    Labelled examples, at least 8. outcome: {question, response, label}, both labels present (each fold of the cross-validation needs both too); compare: {question, responses: [a, b], preferred}; decisions: {input, questions, answers}, at least 8 labelled questions of each type fitted (a temperature per type); mcq: {question, options, answer_index}.
    """
    folds: Annotated[int, Field(ge=2, le=20, title="Folds")] = 5
    """
    k of the k-fold cross-validation.
    """
    method: Annotated[Literal["temperature", "platt"], Field(title="Method")] = "temperature"
    """
    temperature: sigmoid(logit / T), or softmax(log p / T) over a decision's labels; platt: sigmoid(a * logit + b), a > 0 (outcome only: a preference's two sides must still sum to 1, and a decision's labels and a question's options vary in number).
    """
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")] = "direct"
    """
    The judging mode the calibration is fitted and used in.
    """
    model: Annotated[Model32 | None, Field(title="Model")] = None
    """
    Unset or any name without ':': the served model. '<served name>:<adapter>': that LoRA adapter of it (/v1/models lists them); another name with ':' is a 404 model_not_found.
    """
    name: Annotated[str, Field(max_length=200, title="Name")] = ""
    reasoning_tokens: Annotated[int, Field(ge=1, title="Reasoning Tokens")] = 256
    """
    Rationale budget per judgment (reasoning mode).
    """
    seed: Annotated[int, Field(title="Seed")] = 0
    """
    Seed of the stratified fold assignment.
    """
    target: Annotated[Literal["outcome", "compare", "decisions", "mcq"], Field(title="Target")]
    """
    What the calibration applies to.
    """


class RerankResponse(BaseModel):
    budget: BudgetInfo | None = None
    calibration: CalibrationInfo | None = None
    """
    The calibration the relevance scores went through (method='outcome'); the order is the raw one (the map is monotone). Absent: raw.
    """
    id: Annotated[str, Field(title="Id")]
    meta: RerankMeta
    model: Annotated[str, Field(title="Model")]
    results: Annotated[list[RerankResult], Field(title="Results")]
    tie_tolerance: Annotated[float, Field(title="Tie Tolerance")] = 0.0
    """
    Scores closer than this are tied (the engine's precision).
    """
    ties: Annotated[list[list[int]], Field(title="Ties")] = []
    """
    Groups of indices, in ranking order, whose scores chain within tie_tolerance: the engine cannot order them (equal scores go by lowest index).
    """
    usage: Usage


class TypeFit(BaseModel):
    """
    A decisions calibration's fit of one question type.
    """

    at_bound: Annotated[bool, Field(title="At Bound")]
    fit_set: CalibrationFit
    held_out: CalibrationFit
    questions: Annotated[int, Field(title="Questions")]
    """
    Labelled questions of this type.
    """
    temperature: Annotated[float, Field(title="Temperature")]


class AuditResponse(BaseModel):
    budget: BudgetInfo | None = None
    items: Annotated[list[AuditItemResult], Field(title="Items")]
    model: Annotated[str, Field(title="Model")]
    summary: AuditSummary
    tokens_by_condition: Annotated[dict[str, int], Field(title="Tokens By Condition")]
    trace_judge: Annotated[str | None, Field(title="Trace Judge")] = None
    """
    With predictability or inferred_question: the model that read the traces.
    """
    usage: Usage


class ProbabilityCalibration(BaseModel):
    """
    A fitted probability calibration, stored per tenant with the model it was read on.
    """

    binning: Annotated[Literal["equal_mass"], Field(title="Binning")] = "equal_mass"
    bins: Annotated[int, Field(title="Bins")]
    created_at: Annotated[float, Field(title="Created At")]
    default: Annotated[bool, Field(title="Default")] = False
    """
    This tenant's default for its target.
    """
    examples: Annotated[int, Field(title="Examples")]
    """
    Reads fitted: examples, pairs or labelled questions.
    """
    fit_set: CalibrationFit
    """
    Fitted and scored on every example.
    """
    folds: Annotated[int, Field(title="Folds")]
    held_out: CalibrationFit
    """
    k-fold cross-validation: each fold scored by a map fitted on the others. decisions: top-label (each read's confidence against whether its choice is right), folds held out by example, every type pooled.
    """
    id: Annotated[str, Field(title="Id")]
    method: Annotated[Literal["temperature", "platt"], Field(title="Method")]
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")]
    model: Annotated[str, Field(title="Model")]
    name: Annotated[str, Field(title="Name")] = ""
    object: Annotated[Literal["calibration"], Field(title="Object")] = "calibration"
    parameters: Annotated[dict[str, float | bool], Field(title="Parameters")]
    """
    temperature: {temperature}; platt: {a, b}; decisions: a temperature per question type fitted, {predicate, choice, score}; at_bound when a fit stopped at a bound of its range.
    """
    positives: Annotated[int, Field(title="Positives")]
    """
    outcome: examples labelled 1; compare: pairs fitted in the label-1 orientation; decisions and mcq: questions whose raw read puts its largest probability on the correct label.
    """
    reasoning_tokens: Annotated[int | None, Field(title="Reasoning Tokens")]
    """
    The rationale budget (reasoning mode).
    """
    seed: Annotated[int, Field(title="Seed")]
    target: Annotated[Literal["outcome", "compare", "decisions", "mcq"], Field(title="Target")]
    types: Annotated[dict[str, TypeFit] | None, Field(title="Types")] = None
    """
    decisions: the fit of each question type.
    """


class ProbabilityCalibrationList(BaseModel):
    data: Annotated[list[ProbabilityCalibration], Field(title="Data")]
    object: Annotated[Literal["list"], Field(title="Object")] = "list"


class ProbabilityCalibrationResponse(BaseModel):
    binning: Annotated[Literal["equal_mass"], Field(title="Binning")] = "equal_mass"
    bins: Annotated[int, Field(title="Bins")]
    budget: BudgetInfo | None = None
    created_at: Annotated[float, Field(title="Created At")]
    default: Annotated[bool, Field(title="Default")] = False
    """
    This tenant's default for its target.
    """
    examples: Annotated[int, Field(title="Examples")]
    """
    Reads fitted: examples, pairs or labelled questions.
    """
    fit_set: CalibrationFit
    """
    Fitted and scored on every example.
    """
    folds: Annotated[int, Field(title="Folds")]
    held_out: CalibrationFit
    """
    k-fold cross-validation: each fold scored by a map fitted on the others. decisions: top-label (each read's confidence against whether its choice is right), folds held out by example, every type pooled.
    """
    id: Annotated[str, Field(title="Id")]
    method: Annotated[Literal["temperature", "platt"], Field(title="Method")]
    mode: Annotated[Literal["direct", "reasoning"], Field(title="Mode")]
    model: Annotated[str, Field(title="Model")]
    name: Annotated[str, Field(title="Name")] = ""
    object: Annotated[Literal["calibration"], Field(title="Object")] = "calibration"
    parameters: Annotated[dict[str, float | bool], Field(title="Parameters")]
    """
    temperature: {temperature}; platt: {a, b}; decisions: a temperature per question type fitted, {predicate, choice, score}; at_bound when a fit stopped at a bound of its range.
    """
    positives: Annotated[int, Field(title="Positives")]
    """
    outcome: examples labelled 1; compare: pairs fitted in the label-1 orientation; decisions and mcq: questions whose raw read puts its largest probability on the correct label.
    """
    reasoning_tokens: Annotated[int | None, Field(title="Reasoning Tokens")]
    """
    The rationale budget (reasoning mode).
    """
    seed: Annotated[int, Field(title="Seed")]
    target: Annotated[Literal["outcome", "compare", "decisions", "mcq"], Field(title="Target")]
    types: Annotated[dict[str, TypeFit] | None, Field(title="Types")] = None
    """
    decisions: the fit of each question type.
    """
    usage: Usage
