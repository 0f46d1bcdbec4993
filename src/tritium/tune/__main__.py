"""``python -m tritium.tune <suite> [options]``; ``--list`` lists the suites and ``python -m tritium.tune <suite>
--help`` shows a suite's options."""

import importlib
import sys

from tritium.bench.args import split_suite

SUITES = {"attention": "tritium.tune.attention"}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    suite, rest = split_suite("python -m tritium.tune", SUITES, argv, __doc__)
    return importlib.import_module(SUITES[suite]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
