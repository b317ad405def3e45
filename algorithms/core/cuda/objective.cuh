// objective.cuh: what a problem's CUDA source is compiled against (the fused-objective contract
// of isles.problems.base.Problem: cuda_objective; the pair contract of the min-max problems:
// pair_cuda). Every kernel includes the problem's source right after this header, so the source
// may use T, ISLES_DEV, T_INF, u64, add_rn sub_rn mul_rn div_rn (and the float64 dadd_rn ...),
// t_fmod t_cos t_sin t_sqrt t_exp t_log t_abs and t_popc. The source then defines, for the
// kernels after it: OBJ_NACC, OBJ_HAS_V, OBJ_NEXT (real genomes), obj_init, obj_merge, obj_term
// (real) or obj_units and obj_unit (bits), obj_final, obj_violation (with OBJ_HAS_V); or
// PAY_KX, PAY_KY and pay_pair. Valid C under -DISLES_HOST_EMU (problems/cuda_check.py).
#ifndef ISLES_OBJECTIVE_CUH
#define ISLES_OBJECTIVE_CUH
#include "math.cuh"
#endif  // ISLES_OBJECTIVE_CUH
