"""Evolutionary programming (seed 003; Yao, Liu & Lin 1999): :mod:`algorithms.ep.fep` (FEP, CEP
and IFEP, array code, the NumPy twin) and :mod:`algorithms.ep.cuda` (fused CUDA generation,
host-emulated in tests)."""
