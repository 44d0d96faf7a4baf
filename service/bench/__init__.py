"""Benchmarks run from the installed package (``verifier bench ...``): open-loop load and the
evaluation-time compute tradeoff. Pure statistics live in `stats`, plots in `plots`."""
