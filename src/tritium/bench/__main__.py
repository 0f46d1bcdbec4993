"""``python -m tritium.bench <suite> [--out FILE] [suite options]``; ``--list`` lists the suites and
``python -m tritium.bench <suite> --help`` shows a suite's options."""

import argparse
import importlib
import json
import sys

from tritium.bench import SUITES


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = argparse.ArgumentParser(prog="python -m tritium.bench", description=__doc__,
                                  epilog="suites: " + ", ".join(SUITES))
    top.add_argument("suite", nargs="?", help=f"one of: {', '.join(SUITES)}")
    top.add_argument("--list", action="store_true", help="list the suites and exit")
    if not argv or argv[0].startswith("-"):  # no suite: the top level's own options (--list, --help)
        top.parse_args(argv)
        for name, module in SUITES.items():
            print(f"{name:14s} {module}")
        return 0
    suite, rest = argv[0], argv[1:]
    if suite not in SUITES:
        top.error(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
    module = importlib.import_module(SUITES[suite])
    sub = argparse.ArgumentParser(prog=f"python -m tritium.bench {suite}", description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.add_argument("--out", help="write the results as JSON to this file")
    if hasattr(module, "add_arguments"):
        module.add_arguments(sub)
    args = sub.parse_args(rest)
    result = module.run(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
