"""What names a probability calibration in a request, and what a calibrated answer reports
(docs/methods.md J). Apart from the fit's wire models (``calibrate.py``) so that every
answer's model can import it, the decisions one included."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ScalingMethod = Literal["temperature", "platt"]

NO_CALIBRATION = "none"  # a request's calibration_id that asks for the raw read
ID_PREFIX = "pcal_"  # a probability calibration's id (the MCQ priors' ids start with cal_)


def is_probability_calibration(calibration_id: str | None) -> bool:
    """A ``calibration_id`` that names a probability calibration (or asks for none), as
    opposed to a stored MCQ prior: /v1/judge/compare and /v1/decisions take either in one
    field."""
    return calibration_id == NO_CALIBRATION or (
        calibration_id is not None and calibration_id.startswith(ID_PREFIX)
    )


def prior_part(calibration_id: str | None) -> str | None:
    """The id when it names an MCQ debiasing prior (``cal_...``), else None."""
    return None if is_probability_calibration(calibration_id) else calibration_id


def probability_part(calibration_id: str | None) -> str | None:
    """The id when it names a probability calibration (or ``"none"``), else None."""
    return calibration_id if is_probability_calibration(calibration_id) else None


class CalibrationInfo(BaseModel):
    """Which calibration an answer's probability went through (absent: the raw read)."""

    id: str
    method: ScalingMethod
    parameters: dict[str, float | bool]


class DecisionCalibrationInfo(CalibrationInfo):
    """A decision's calibration: one temperature per question type. ``applied`` is false when
    none of the answered questions is of a type the calibration was fitted on."""

    applied: bool
    temperatures: dict[str, float] = Field(
        description="Question type (predicate, choice, score) -> its temperature."
    )
