// obj_fold.cuh: host only (appended after a problem's fused objective under -DISLES_HOST_EMU by the
// host builds that take it: algorithms/pso/host_epoch.py; never part of a GPU source). A fused
// objective's accumulators (the cuda_objective contract, problems/base.py: obj_init, obj_term,
// obj_merge) folded over one row x[0..dim) in numpy.add.reduce's order, the pairwise sum of
// numpy/_core/src/umath/loops_utils.h.src (npsum.cuh writes the same order for a sum of squares):
//   fewer than 8 terms: obj_init, then the terms left to right;
//   8 to 128 terms: 8 partial folds r[k] over the terms k, k + 8, k + 16 ..., merged with obj_merge
//     as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), the n % 8 last terms then folded into it;
//   more: split at n2 = n/2 - (n/2) % 8, the two halves folded so and merged.
// That is the array code's `(...).sum(axis=-1)` of the same terms bit for bit at any dim (the
// left-to-right fold only below 8 terms). numpy.multiply.reduce is left to right: obj_fold_row
// folds an accumulator that obj_init does not start at 0 (a product, Griewank's) left to right.
// Where obj_term computes a term as the array code does (Rastrigin, Sphere, Schwefel 2.26,
// Griewank; Ackley's means where the C library's exp is NumPy's), f is the array code's bit for
// bit; the host build checks it on points of the box and else folds left to right.
#ifndef ISLES_OBJ_FOLD_CUH
#define ISLES_OBJ_FOLD_CUH
#ifdef ISLES_HOST_EMU
#define OBJ_FOLD_BLOCK 128

// term j of the row into the accumulators a (obj_term's arguments as the left-to-right fold gives them)
static inline void obj_fold_term(T* a, const T* x, const int j, const int dim) {
    obj_term(a, x[j], (OBJ_NEXT && j + 1 < dim) ? x[j + 1] : (T)0, j);
}

// acc (OBJ_NACC) = the fold of the terms j0 .. j0 + n - 1 of the row x (dim coordinates), NumPy's order
static void obj_fold_np(T* acc, const T* x, const int j0, const int n, const int dim) {
    if (n < 8) {
        obj_init(acc);
        for (int j = j0; j < j0 + n; ++j) obj_fold_term(acc, x, j, dim);
        return;
    }
    if (n <= OBJ_FOLD_BLOCK) {
        T r[8][OBJ_NACC];
        for (int k = 0; k < 8; ++k) {
            obj_init(r[k]);
            obj_fold_term(r[k], x, j0 + k, dim);
        }
        int i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; ++k) obj_fold_term(r[k], x, j0 + i + k, dim);
        obj_merge(r[0], r[1]);
        obj_merge(r[2], r[3]);
        obj_merge(r[0], r[2]);
        obj_merge(r[4], r[5]);
        obj_merge(r[6], r[7]);
        obj_merge(r[4], r[6]);
        obj_merge(r[0], r[4]);
        for (; i < n; ++i) obj_fold_term(r[0], x, j0 + i, dim);
        for (int a = 0; a < OBJ_NACC; ++a) acc[a] = r[0][a];
        return;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    T other[OBJ_NACC];
    obj_fold_np(acc, x, j0, n2, dim);
    obj_fold_np(other, x, j0 + n2, n - n2, dim);
    obj_merge(acc, other);
}

// acc (OBJ_NACC) = the row x (dim coordinates) folded as the array code reduces it: an accumulator
// that obj_init starts at 0 (a sum) in NumPy's pairwise order (obj_fold_np), any other (a product)
// left to right
static void obj_fold_row(T* acc, const T* x, const int dim) {
    obj_fold_np(acc, x, 0, dim, dim);
    T seq[OBJ_NACC];
    obj_init(seq);
    int sums = 1;
    for (int a = 0; a < OBJ_NACC; ++a) sums &= (seq[a] == (T)0);
    if (sums) return;
    for (int j = 0; j < dim; ++j) obj_fold_term(seq, x, j, dim);
    T init[OBJ_NACC];
    obj_init(init);
    for (int a = 0; a < OBJ_NACC; ++a)
        if (init[a] != (T)0) acc[a] = seq[a];
}
#endif
#endif  // ISLES_OBJ_FOLD_CUH
