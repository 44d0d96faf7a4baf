"""``python -m loadtests <name> ...`` = ``verifier bench <name> ...``."""

from loadtests.cli import bench_app

bench_app(prog_name="verifier bench")
