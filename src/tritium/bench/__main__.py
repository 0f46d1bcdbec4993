import argparse
import importlib
import json
import sys

from tritium.bench import SUITES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritium.bench", description=__doc__)
    parser.add_argument("suite", nargs="?", help=f"one of: {', '.join(SUITES)}")
    parser.add_argument("--list", action="store_true", help="list the suites and exit")
    parser.add_argument("--out", help="write the results as JSON to this file")
    args, rest = parser.parse_known_args(argv)
    if args.list or not args.suite:
        for name, module in SUITES.items():
            print(f"{name:12s} {module}")
        return 0
    if args.suite not in SUITES:
        parser.error(f"unknown suite {args.suite!r}; expected one of {', '.join(SUITES)}")
    module = importlib.import_module(SUITES[args.suite])
    sub = argparse.ArgumentParser(prog=f"python -m tritium.bench {args.suite}")
    if hasattr(module, "add_arguments"):
        module.add_arguments(sub)
    sub_args = sub.parse_args(rest)
    result = module.run(sub_args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
