"""Recorded one-off experiments: each backs a finding in docs/ (its command and result are
there), and none is a benchmark that is kept green. Run one with
``python -m loadtests.experiments.<name> --help``."""
