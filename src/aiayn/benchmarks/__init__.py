"""Benchmarks: complexity table, training and decoding throughput, measured against peers."""
