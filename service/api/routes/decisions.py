"""/v1/decisions: OpenAI's Decisions API (thin: validate, check sizes, submit)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.errors import ERRORS
from service.api.limits import check_reasoning_tokens, check_samples, check_texts
from service.api.pipeline import JobDep
from service.protocol import Metered
from service.protocol.decisions import DecisionRequest, DecisionResponse
from service.serving.decisions import input_blocks, question_spec

router = APIRouter(prefix="/v1", tags=["decisions"], responses=ERRORS)


def _check_sizes(job: JobDep, req: DecisionRequest) -> None:
    """413 for an input item, instructions or option text over the text limit, by field; 422
    for a thinking budget or samples over their limits."""
    limits = job.state.settings.limits
    if req.mode == "reasoning":
        check_reasoning_tokens(limits, req.reasoning_tokens)
        check_samples(limits, req.samples)
    for i, block in enumerate(input_blocks(req.input)):
        check_texts(limits, **{f"input[{i}]" if block.header else "input": block.text})
    for i, q in enumerate(req.questions):
        spec = question_spec(q)
        check_texts(limits, **{f"questions[{i}].instructions": spec.instructions})
        for j, (text, desc) in enumerate(spec.options):
            check_texts(limits, **{f"questions[{i}].options[{j}]": f"{text} {desc or ''}"})


@router.post("/decisions", response_model=DecisionResponse)
async def decide(req: DecisionRequest, job: JobDep) -> Metered:
    """Typed answers (predicate, choice, score) about one input, from label probabilities."""
    _check_sizes(job, req)
    await job.check_calibration(req.calibration_id, req.debias, req.choice_counts)
    return await job.run("decision", req)
