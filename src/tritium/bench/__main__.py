"""``python -m tritium.bench <suite> [--out FILE] [suite options]``; ``--list`` lists the suites and
``python -m tritium.bench <suite> --help`` shows a suite's options."""

import argparse
import importlib
import sys

from tritium.bench import SUITES
from tritium.bench.args import Parser, UsageError, gpu_visible, no_gpu_reason, output_file, split_suite
from tritium.bench.jsonio import save_json


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    suite, rest = split_suite("python -m tritium.bench", SUITES, argv, __doc__)
    module = importlib.import_module(SUITES[suite])
    sub = Parser(prog=f"python -m tritium.bench {suite}", description=module.__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.add_argument("--out", type=output_file, help="write the results as JSON to this file")
    if hasattr(module, "add_arguments"):
        module.add_arguments(sub)
    args = sub.parse_args(rest)
    needs_gpu = getattr(module, "NEEDS_GPU", None)  # what the suite measures there
    if needs_gpu and not gpu_visible():
        sub.error(f"this suite needs a GPU ({needs_gpu}); {no_gpu_reason()}")
    try:
        result = module.run(args)
    except UsageError as e:  # raised before the suite does any work
        sub.error(str(e))
    if args.out:
        save_json(result, args.out, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
