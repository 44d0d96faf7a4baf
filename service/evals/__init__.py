"""Evaluation harnesses that drive a running service over HTTP.

- `processbench`: first-error prediction on ProcessBench (docs/methods.md A.7-A.9) via
  /v1/judge/process.
- `bestofn`: Best-of-N selection on the GSM8K example solutions (Part D) via /v1/score.
- `mcq`, `audits`: MCQ accuracy with debiasing, PopMCQ and the choices-only audit.
- `data`: every reader of the data sets (the scoring layer does no file I/O).
- `cli`: the typer app `eval_app` (mounted as ``verifier eval``).

The harnesses talk through ``verifier_client`` and read its models, never the server's wire
models (an import-linter contract in pyproject.toml).
"""
