"""The job kinds' names, alone: what the settings and the queue need without the wire models.

A kind is declared here and given its request and response models in ``protocol/jobs.py``;
every table keyed by kind is built with ``for_every_kind`` there, so a kind added here alone
fails at import.
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
    "calibrate",
    "mcq_audit",
    "mcq_popmcq",
    "reward",
    "classify",
    "pooling",
    "decision",
    "compare",
    "rewards",
    "run_code",
]

JOB_KINDS: Final[tuple[JobKind, ...]] = get_args(JobKind)
