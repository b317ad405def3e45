// deb.cuh: Deb's feasibility rules (K. Deb, CMAME 186, 2000; problems/constraints.py better):
// a = (fa, va) is strictly better than b = (fb, vb) iff (va, fa) < (vb, fb) lexicographically.
// A macro, so that it serves any element type (elementwise kernels included); its arguments
// must have no side effects.
#ifndef ISLES_DEB_CUH
#define ISLES_DEB_CUH
#define ISLES_BETTER(fa, va, fb, vb) (((va) < (vb)) || (((va) == (vb)) && ((fa) < (fb))))
#endif  // ISLES_DEB_CUH
