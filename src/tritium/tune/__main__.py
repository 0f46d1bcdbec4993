"""``python -m tritium.tune attention [options]`` (``--help`` for a suite's options)."""

import sys

SUITES = {"attention": "tritium.tune.attention"}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUITES:
        print(f"usage: python -m tritium.tune {{{','.join(SUITES)}}} [options]", file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(SUITES[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
