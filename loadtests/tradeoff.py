"""The evaluation-time compute tradeoff: ``python loadtests/tradeoff.py --limit 50``.

The same as ``verifier bench tradeoff`` (service/bench/tradeoff.py holds the code); options:
``--help``.
"""

import sys

from service.bench.cli import bench_app

if __name__ == "__main__":
    bench_app(["tradeoff", *sys.argv[1:]], prog_name="loadtests/tradeoff.py")
