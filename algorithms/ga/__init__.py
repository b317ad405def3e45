"""Genetic algorithm on bit-string genomes (seed 002): :mod:`algorithms.ga.ga` (array code, the
NumPy twin) and :mod:`algorithms.ga.cuda` (fused CUDA generation, host-emulated in tests)."""
