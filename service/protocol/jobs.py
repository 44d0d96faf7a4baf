"""The job kinds: one closed set for the routes, the worker's dispatch table and the budget.

A kind names what a job asks for; its payload is that kind's request model. The API submits
only these, ``service.serving.handler.ROUTES`` runs exactly these and ``service.serving.budget``
estimates exactly these (a unit test checks that both tables cover the set).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

JobKind = Literal[
    "outcome",
    "process",
    "split",
    "score",
    "rerank",
    "mcq_answer",
    "mcq_batch",
    "mcq_calibrate",
    "mcq_audit",
    "mcq_popmcq",
    "reward",
]

JOB_KINDS: Final[tuple[JobKind, ...]] = get_args(JobKind)
