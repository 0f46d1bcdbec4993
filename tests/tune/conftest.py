from bench.conftest import cpu_only  # noqa: F401 (a fixture, for the command-line tests here)
