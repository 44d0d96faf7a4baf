"""Reading a /metrics page (benchmarks and tests), with prometheus_client's own parser, never a
hand-made regex."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def samples(text: str, sample: str, **labels: str) -> Iterator[Sample]:
    """Every sample named ``sample`` (e.g. ``verifier_batch_size_count``) whose labels include
    ``labels``."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                yield s


def sample_sum(text: str, sample: str, **labels: str) -> float:
    """The sum of every sample named ``sample`` whose labels include ``labels``; 0 when there
    is none."""
    return sum(s.value for s in samples(text, sample, **labels))


def has_sample(text: str, sample: str, **labels: str) -> bool:
    """Whether the page exposes a sample named ``sample`` with (at least) these labels."""
    return next(samples(text, sample, **labels), None) is not None
