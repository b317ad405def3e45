"""Evolutionary programming (seed 003; Yao, Liu & Lin 1999): :mod:`isles.algorithms.ep.fep` (FEP, CEP
and IFEP, array code, the NumPy twin) and :mod:`isles.algorithms.ep.cuda` (fused CUDA generation,
host-emulated in tests)."""
