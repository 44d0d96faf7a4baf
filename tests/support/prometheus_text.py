"""Reading a /metrics page in tests, with prometheus_client's own parser (no hand-made regex)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample_sum(text: str, sample: str, **labels: str) -> float:
    """The sum of every sample named ``sample`` (e.g. ``verifier_jobs_dead_total``,
    ``verifier_batch_size_count``) whose labels include ``labels``; 0 when there is none."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )


def has_sample(text: str, sample: str, **labels: str) -> bool:
    """Whether the page exposes a sample named ``sample`` with (at least) these labels."""
    return any(
        s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
        for family in text_string_to_metric_families(text)
        for s in family.samples
    )
