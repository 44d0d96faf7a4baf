"""/v1/decisions: OpenAI's Decisions API (thin: validate, check sizes, submit)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import tenant_name
from service.api.errors import ERRORS
from service.api.limits import check_reasoning_tokens, check_samples, check_texts
from service.api.pipeline import JobCall, JobDep
from service.errors import CalibrationMismatch, UnknownCalibration
from service.protocol import Metered
from service.protocol.decisions import DecisionRequest, DecisionResponse
from service.scoring.debias import calibration_mismatch
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


async def _check_calibration(job: JobCall, req: DecisionRequest) -> None:
    """Refuse a wrong calibration before anything is queued or charged (the worker re-checks)."""
    if req.calibration_id is None:
        return
    cal = await job.state.calibrations.get(tenant_name(job.request), req.calibration_id)
    if cal is None:
        raise UnknownCalibration(
            f"no calibration {req.calibration_id!r} for this tenant; list yours with GET "
            "/v1/mcq/calibrations"
        )
    fitted = (cal.method, cal.k, cal.model)
    model = job.state.settings.model_name
    why = calibration_mismatch(cal.id, fitted, req.debias, req.choice_counts, model)
    if why is not None:
        raise CalibrationMismatch(why)


@router.post("/decisions", response_model=DecisionResponse)
async def decide(req: DecisionRequest, job: JobDep) -> Metered:
    """Typed answers (predicate, choice, score) about one input, from label probabilities."""
    _check_sizes(job, req)
    await _check_calibration(job, req)
    return await job.run("decision", req)
