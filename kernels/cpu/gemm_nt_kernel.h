/*
 * gemm_nt_kernel.h — the register tile of gemm_nt.c, written once and included there once per
 * ISA with these macros set (undefined again at the end):
 *   GK_NAME the function's name, GK_ATTR its attributes (target ISA and CPU_FMA_CONTRACT),
 *   GK_VEC  the vector type of GK_VL floats (4-byte aligned; plain float where the compiler has
 *           no vector extension), GK_MR rows of inputs, GK_NV vectors of outputs per row.
 *
 *   c (MR, NV*VL), rows ldc floats apart: c = (first ? 0 : c) + xp (kc,MR)^T @ wp (kc,NV*VL)
 *
 * xp is a packed panel of MR input rows (xp[k][r]), wp one of NV*VL weight rows (wp[k][j]): at
 * every k, NV vector loads of w and MR broadcasts of x feed MR*NV accumulators, acc += x * w in
 * the order of k, one fma where the ISA has one. An output's chain is that of k alone; c
 * carries it from one call to the next (a partial stored as fp32 and continued is the same chain).
 * c and wp are read and written through the vector type (4-byte aligned: GCC's vectors alias
 * their element type), not memcpy: with GCC's generic tuning an unaligned 32-byte memcpy is
 * split in halves through the stack, which kept all 12 AVX2 accumulators in memory (9x slower).
 */
GK_ATTR
static void GK_NAME(int32_t kc, const float *xp, const float *wp, float *c, int32_t ldc,
                    int first) {
    GK_VEC acc[GK_MR][GK_NV];
#pragma GCC unroll 16
    for (int32_t r = 0; r < GK_MR; r++)
#pragma GCC unroll 4
        for (int32_t v = 0; v < GK_NV; v++) {
            if (first)
                acc[r][v] = (GK_VEC){0};
            else
                acc[r][v] = *(const GK_VEC *)(c + (size_t)r * ldc + v * GK_VL);
        }
    for (int32_t k = 0; k < kc; k++) {
        GK_VEC wv[GK_NV];
#pragma GCC unroll 4
        for (int32_t v = 0; v < GK_NV; v++) wv[v] = *(const GK_VEC *)(wp + v * GK_VL);
#pragma GCC unroll 16
        for (int32_t r = 0; r < GK_MR; r++) {
            float x = xp[r];
#pragma GCC unroll 4
            for (int32_t v = 0; v < GK_NV; v++) acc[r][v] += x * wv[v];
        }
        xp += GK_MR, wp += GK_NV * GK_VL;
    }
#pragma GCC unroll 16
    for (int32_t r = 0; r < GK_MR; r++)
#pragma GCC unroll 4
        for (int32_t v = 0; v < GK_NV; v++)
            *(GK_VEC *)(c + (size_t)r * ldc + v * GK_VL) = acc[r][v];
}

#undef GK_NAME
#undef GK_ATTR
#undef GK_VEC
#undef GK_VL
#undef GK_MR
#undef GK_NV
