"""Genetic algorithm on bit-string genomes (seed 002): :mod:`isles.algorithms.ga.ga` (array code, the
NumPy twin) and :mod:`isles.algorithms.ga.cuda` (fused CUDA generation, host-emulated in tests)."""
