"""Evaluation harnesses that drive a running service over HTTP.

- `processbench`: first-error prediction on ProcessBench (docs/methods.md A.7-A.9) via
  /v1/judge/process.
- `bestofn`: Best-of-N selection on the GSM8K example solutions (Part D) via /v1/score.
- `cli`: the typer app `eval_app` (mounted as ``verifier eval``).
"""
