"""Throughput estimators: fill the gaps of a partial profile (docs/profiling.md)."""
