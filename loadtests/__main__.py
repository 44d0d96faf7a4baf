"""``python -m service.bench <name> ...`` = ``verifier bench <name> ...``."""

from service.bench.cli import bench_app

bench_app(prog_name="verifier bench")
