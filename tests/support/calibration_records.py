"""Stored probability calibrations built by hand, for unit tests of applying them."""

from __future__ import annotations

import time
from typing import Any

from service.protocol.calibrate import CalibrationFit, CalibrationMetrics, ProbabilityCalibration
from service.stores import probability_calibrations as pc


def metrics() -> CalibrationMetrics:
    return CalibrationMetrics(
        n=2, base_rate=0.5, mean_probability=0.5, nll=0.7, brier=0.25, ece=0.0, auroc=0.5, bins=[]
    )


def record(method: str = "platt", **update: Any) -> ProbabilityCalibration:
    params: dict[str, float | bool] = (
        {"a": 0.5, "b": -0.3, "at_bound": False}
        if method == "platt"
        else {"temperature": 2.0, "at_bound": False}
    )
    fit = CalibrationFit(raw=metrics(), calibrated=metrics())
    cal = ProbabilityCalibration.model_validate(
        {
            "id": pc.new_probability_calibration_id(),
            "target": "outcome",
            "method": method,
            "parameters": params,
            "model": "m",
            "mode": "direct",
            "reasoning_tokens": None,
            "examples": 10,
            "positives": 5,
            "folds": 5,
            "bins": 10,
            "seed": 0,
            "fit_set": fit.model_dump(),
            "held_out": fit.model_dump(),
            "created_at": time.time(),
        }
    )
    return cal.model_copy(update=update)
