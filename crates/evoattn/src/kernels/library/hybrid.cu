// The hybrids of #38, as the founding documents define them: one product by cuBLASLt, the
// other by our GEMM (gemm.cuh), the row kernel (rows.cu) between them. `hybrid-qk`: cuBLASLt
// Q·Kᵀ, our P·V; `hybrid-pv`: our Q·Kᵀ, cuBLASLt P·V. The module holds both kernels: the row
// kernel under the spec's name, the GEMM under `<name>_gemm` (EVOATTN_GEMM_NAME).
#include "rows.cu"
#include "gemm.cuh"
