"""Benchmarks against peers and under load; run them with ``verifier bench <name>`` (or
``python loadtests/<name>.py`` from a checkout). The package is part of the distribution so
that they run from an installed service too."""
