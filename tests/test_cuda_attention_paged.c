/*
 * test_cuda_attention_paged.c — on the CUDA backend, decode against a paged KV cache (ABI 1.9,
 * attention_decode_paged) gives the bits of its attention_decode on the same cache laid out
 * unpaged (both walk the same key sequence in the same tiles: kernels/cuda/attention.cu), and
 * the cpu backend's paged decode within test_cuda_attention.c's decode tolerance (atol 1e-5,
 * rtol 1e-4: the GPU sums in another order). Runs on a real GPU, or under the host emulation with
 * GRPO_CUDA_EMULATION=1 (the *_emu registration), like the other test_cuda_* suites.
 *
 * The cache (as tests/test_attention_paged.c's, on cpu): R = 7 rows of S = 90 slots, left padding
 * 0..37 (a row's first real slot rarely on a page boundary, so most 32-key tiles span two or three
 * 16-slot pages), lengths from 1 slot past the padding to S, a masked-out run of 3 slots in every
 * row (finite values there, 50, as padding tokens give; the cpu op asks for them); row 5 shares
 * row 0's first two pages (as the G rows of one prompt do after the host's fan-out) and has a
 * page of its own after them; row 6 has len 0 (no page: zeros out). The pages sit in a shuffled
 * pool with keys and values of a page side by side and a gap after them (pages pstride floats
 * apart, as a model pack lays them out per layer); blocks a row never reads have no page (-1).
 * Every float neither backend may read holds NaN: the pool outside the slots from a row's first
 * real one to len - 1, the unpaged cache's left padding and slots at or after len. Shapes: GQA
 * (NH/NKV 2 and 8), MHA, HD 64, 24, 16 and 128 (two, one partial, one and four dims per lane),
 * and groups of 36 and 72 query heads per kv head (decode's other block shapes: several heads a
 * warp, a group over two blocks; 72 against the unpaged decode alone: the cpu op takes <= 64).
 * Outputs are NaN-prefilled (must be written).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_parity.h"

enum { R = 7, S = 90, PG = 16, NBLK = (S + PG - 1) / PG, SHARED = 2 /* row 5's pages of row 0 */ };
static const int32_t pad[R] = {0, 3, 16, 21, 37, 0, 0}, len[R] = {90, 40, 17, 22, 75, 40, 0};

static cuda_parity P;

static void setup(void) { cuda_parity_open(&P); }
static void teardown(void) { cuda_parity_close(&P); }

/* Slot s of row r is read: after the padding and before len; and real: outside the hole at
 * pad + 5 .. 7 (read, masked out). */
static int slot_read(int32_t r, int32_t s) { return s >= pad[r] && s < len[r]; }
static int slot_real(int32_t r, int32_t s) {
    return slot_read(r, s) && !(s >= pad[r] + 5 && s < pad[r] + 8);
}

/* A shuffled order of the n page ids. */
static void shuffle(int32_t *perm, int32_t n) {
    for (int32_t i = 0; i < n; i++) perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(cuda_parity_uniform(0.0f, 1.0f) * (float)(i + 1)) % (i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

/* The page table: each block a row reads (from its first real slot to len - 1) a page of its
 * own, but row 5's first SHARED blocks, which are row 0's. */
static void make_table(int32_t *table) {
    int32_t perm[R * NBLK];
    shuffle(perm, R * NBLK);
    for (int32_t r = 0; r < R; r++)
        for (int32_t blk = 0; blk < NBLK; blk++) {
            int used = blk * PG < len[r] && (blk + 1) * PG > pad[r];
            table[r * NBLK + blk] = used ? perm[r * NBLK + blk] : -1;
        }
    for (int32_t blk = 0; blk < SHARED; blk++) table[5 * NBLK + blk] = table[blk];
}

/* One case: NH query heads on NKV kv heads of HD. */
static void paged_case(int32_t NH, int32_t NKV, int32_t HD) {
    const size_t ks = (size_t)NKV * HD, nc = (size_t)R * S * ks, nq = (size_t)R * NH * HD;
    const size_t pagef = PG * ks, pstride = 2 * pagef + 40; /* k | v | a gap */
    const size_t npool = (size_t)R * NBLK * pstride;
    float *kc = malloc(nc * 4), *vc = malloc(nc * 4), *pool = malloc(npool * 4);
    int32_t cm[R * S], table[R * NBLK];
    make_table(table);
    for (size_t i = 0; i < npool; i++) pool[i] = NAN;
    for (int32_t r = 0; r < R; r++)
        for (int32_t s = 0; s < S; s++) {
            cm[r * S + s] = slot_real(r, s);
            float *k = kc + ((size_t)r * S + s) * ks, *v = vc + ((size_t)r * S + s) * ks;
            for (size_t e = 0; e < ks; e++) { /* holes: finite, as the op asks (padding tokens') */
                int from0 = r == 5 && s < SHARED * PG, real = cm[r * S + s];
                float hole = slot_read(r, s) ? 50.0f : NAN;
                k[e] = from0 ? kc[(size_t)s * ks + e] : real ? cuda_parity_uniform(-1.5f, 1.5f)
                                                              : hole;
                v[e] = from0 ? vc[(size_t)s * ks + e] : real ? cuda_parity_uniform(-1.0f, 1.0f)
                                                              : hole;
            }
            if (!slot_read(r, s)) continue; /* only the slots a row reads go into its pages */
            float *pg = pool + (size_t)table[r * NBLK + s / PG] * pstride + (size_t)(s % PG) * ks;
            memcpy(pg, k, ks * 4), memcpy(pg + pagef, v, ks * 4);
        }
    cuda_pair k = cuda_pair_new(&P, kc, nc * 4), v = cuda_pair_new(&P, vc, nc * 4);
    cuda_pair pl = cuda_pair_new(&P, pool, npool * 4), tb = cuda_pair_new(&P, table, sizeof table);
    cuda_pair mask = cuda_pair_new(&P, cm, sizeof cm), ln = cuda_pair_new(&P, len, sizeof len);
    cuda_pair q = cuda_pair_rand(&P, nq, -1.5f, 1.5f);
    cuda_pair out = cuda_pair_fill(&P, nq, NAN), out_paged = cuda_pair_fill(&P, nq, NAN);
    grpo_ops *c = P.cuda, *h = P.cpu;
    c->attention_decode(c->ctx, out.dev, q.dev, k.dev, v.dev, mask.dev, ln.dev, R, S, NH, NKV, HD);
    c->attention_decode_paged(c->ctx, out_paged.dev, q.dev, pl.dev, (float *)pl.dev + pagef,
                              (int64_t)pstride, tb.dev, NBLK, PG, mask.dev, ln.dev, R, S, NH, NKV,
                              HD);
    const int with_cpu = NH / NKV <= 64; /* the cpu op's CPU_ATT_REP_MAX */
    if (with_cpu)
        h->attention_decode_paged(h->ctx, out_paged.cpu, q.cpu, pl.cpu, (float *)pl.cpu + pagef,
                                  (int64_t)pstride, tb.cpu, NBLK, PG, mask.cpu, ln.cpu, R, S, NH,
                                  NKV, HD);
    float *a = malloc(nq * 4), *b = malloc(nq * 4);
    c->sync(c->ctx);
    c->download(c->ctx, a, out.dev, nq * 4);
    c->download(c->ctx, b, out_paged.dev, nq * 4);
    for (size_t i = 0; i < nq; i++) ck_assert_msg(!isnan(b[i]), "paged out[%zu] is NaN", i);
    for (int32_t r = 0; r < R; r++)
        ck_assert_msg(memcmp(a + (size_t)r * NH * HD, b + (size_t)r * NH * HD,
                             (size_t)NH * HD * 4) == 0,
                      "row %d (pad %d, len %d), NH %d NKV %d HD %d: paged bits differ from the "
                      "unpaged decode's", r, pad[r], len[r], NH, NKV, HD);
    for (size_t i = (size_t)6 * NH * HD; i < nq; i++) ck_assert(b[i] == 0.0f); /* len 0 */
    char what[80];
    snprintf(what, sizeof what, "paged decode NH%d NKV%d HD%d (cuda vs cpu)", NH, NKV, HD);
    if (with_cpu) ck_assert_int_eq(cuda_pair_compare(&P, &out_paged, nq, 1e-5, 1e-4, what), 0);
    free(a), free(b), free(kc), free(vc), free(pool);
    cuda_pair *all[] = {&k, &v, &pl, &tb, &mask, &ln, &q, &out, &out_paged};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
}

START_TEST(paged_decode_has_the_unpaged_bits) {
    ck_assert(grpo_ops_supports(P.cuda, attention_decode_paged));
    paged_case(4, 2, 64);
    paged_case(2, 2, 24);
    paged_case(8, 1, 16);
    paged_case(4, 4, 128);
}
END_TEST

START_TEST(paged_decode_of_large_groups) {
    paged_case(36, 1, 8);
    paged_case(72, 1, 8);
}
END_TEST

int main(void) {
    cuda_parity_skip_unless_available("test_cuda_attention_paged");
    Suite *s = suite_create("cuda_attention_paged");
    TCase *tc = tcase_create("parity");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, paged_decode_has_the_unpaged_bits);
    tcase_add_test(tc, paged_decode_of_large_groups);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
