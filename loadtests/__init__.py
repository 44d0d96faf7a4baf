"""Every benchmark, in one home: ``verifier bench <name>`` runs each (``python -m loadtests
<name>`` is the same). `harness` starts and stops the processes they measure (servers, vLLM,
Redis), `workload` holds the workloads several of them share, `stats` and `plots` the pure
statistics and the figures. The package is part of the distribution, so the benchmarks run from
an installed service too."""
