"""Speed measurements (figures in docs/benchmarks.md) and the stress harness.

Each runs from the repository root as a module, e.g. `python -m benchmarks.clones`; its
flags are a frozen settings class declared with `core.params.param`, built once in `main()`.
"""
