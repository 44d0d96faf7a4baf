"""Open-loop load against any endpoint: ``python loadtests/load.py --rate 4 --duration 30``.

The same as ``verifier bench load`` (service/bench/load.py holds the code); options:
``--help``.
"""

import sys

from service.bench.cli import bench_app

if __name__ == "__main__":
    bench_app(["load", *sys.argv[1:]], prog_name="loadtests/load.py")
