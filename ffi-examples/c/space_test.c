/* C-side test of the schedule-space calls: every space is made or refused with its status,
 * a prepared space reports the default exactly once, tuning skips failed measurements and
 * checks its output capacity before measuring, misuse returns codes, and two threads ranking
 * one handle get identical results.
 *
 *   space_test COGNATE_MODEL_DIR MATRIX.mtx
 *
 * (COGNATE_MODEL_DIR: tests/data/fixtures/tiny-cognate, which has TACO, SPADE and SparseTIR
 * heads.) Prints "space_test: ok" and exits 0, or lists the failures and exits 1. */
#include <dashrank.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(call, want)                                                              \
  do {                                                                                  \
    dashrank_status got_ = (call);                                                      \
    if (got_ != (want)) {                                                               \
      char m_[512];                                                                     \
      dashrank_last_error_message(m_, sizeof m_, NULL);                                 \
      fprintf(stderr, "FAIL %s:%d: %s -> %u, want %u (%s)\n", __FILE__, __LINE__, #call, \
              (unsigned)got_, (unsigned)(want), m_);                                    \
      failures++;                                                                       \
    }                                                                                   \
  } while (0)

#define TRUE(cond)                                                         \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
      failures++;                                                          \
    }                                                                      \
  } while (0)

typedef struct {
  int calls;
  size_t last_index;
} counter;

/* Fails every second call; otherwise a time derived from the index. */
static bool flaky(void *user, const dashrank_measure_request *r, double *ms) {
  counter *c = user;
  c->calls++;
  c->last_index = r->index;
  if (!r->toolchain || !r->line || !r->toolchain[0]) return false;
  if (c->calls % 2 == 0) return false;
  *ms = 1.0 + (double)(r->index % 13);
  return true;
}

/* A callback that reports a negative time: counted as a failed measurement. */
static bool negative(void *user, const dashrank_measure_request *r, double *ms) {
  (void)user;
  (void)r;
  *ms = -1.0;
  return true;
}

typedef struct {
  const dashrank_model *model;
  const dashrank_matrix *matrix;
  const dashrank_space_candidates *cands;
  dashrank_ranked out[6];
  size_t n;
  dashrank_status st;
} job;

static void *rank_job(void *arg) {
  job *j = arg;
  j->st = dashrank_space_top_k(j->model, j->matrix, j->cands, 5, j->out, 6, &j->n);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s COGNATE_MODEL_DIR MATRIX.mtx\n", argv[0]);
    return 2;
  }
  dashrank_model *model = NULL;
  dashrank_matrix *matrix = NULL;
  dashrank_space *space = NULL, *taco = NULL;
  dashrank_space_candidates *cands = NULL;
  EXPECT(dashrank_model_load(argv[1], NULL, &model), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_embed_file(model, argv[2], &matrix), DASHRANK_STATUS_OK);
  if (!model || !matrix) return 1;

  /* Spaces: made, refused with UNSUPPORTED_KERNEL, or INVALID_ARGUMENT for bad codes. */
  EXPECT(dashrank_space_new(DASHRANK_TARGET_SPADE, DASHRANK_KERNEL_SPMV, 0, &space),
         DASHRANK_STATUS_UNSUPPORTED_KERNEL);
  TRUE(space == NULL);
  EXPECT(dashrank_space_new(DASHRANK_TARGET_GPU_SPARSETIR, DASHRANK_KERNEL_SPMV, 64, &space),
         DASHRANK_STATUS_UNSUPPORTED_KERNEL);
  EXPECT(dashrank_space_new(3, DASHRANK_KERNEL_SPMM, 0, &space), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_space_from_name("spade-spgemm", 0, &space), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_space_new(DASHRANK_TARGET_SPADE, DASHRANK_KERNEL_SPMM, 0, NULL),
         DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_from_name("sparsetir-spmm", 64, &space), DASHRANK_STATUS_OK);
  char name[32];
  EXPECT(dashrank_space_name(space, name, sizeof name, NULL), DASHRANK_STATUS_OK);
  TRUE(strcmp(name, "sparsetir-spmm") == 0);

  /* Prepare: the head is found by target and kernel; a wrong head is refused. */
  EXPECT(dashrank_space_prepare(model, "spade/spmm", space, matrix, &cands),
         DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_space_prepare(model, "gpu/none", space, matrix, &cands),
         DASHRANK_STATUS_UNKNOWN_HEAD);
  TRUE(cands == NULL);
  EXPECT(dashrank_space_prepare(model, NULL, space, matrix, &cands), DASHRANK_STATUS_OK);
  size_t len = 0, ranked = 0, def = 0;
  EXPECT(dashrank_space_candidates_len(cands, &len, &ranked), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_default(cands, &def), DASHRANK_STATUS_OK);
  TRUE(len == 288 && ranked > 0 && ranked <= len && def < len);
  dashrank_candidate_info info;
  EXPECT(dashrank_space_candidates_info(cands, def, &info), DASHRANK_STATUS_OK);
  TRUE(info.is_default && info.state <= DASHRANK_CANDIDATE_INVALID_SCHEDULE);
  EXPECT(dashrank_space_candidates_info(cands, len, &info), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  char text[512];
  EXPECT(dashrank_space_candidates_render(cands, def, NULL, text, sizeof text, NULL),
         DASHRANK_STATUS_OK);
  TRUE(strncmp(text, "{\"kernel\":\"spmm\"", 16) == 0);
  size_t need = 0;
  EXPECT(dashrank_space_candidates_line(cands, def, NULL, 0, &need),
         DASHRANK_STATUS_INSUFFICIENT_SIZE);
  TRUE(need > 1);

  /* Ranking: the default is reported exactly once; a short buffer reports the size. */
  dashrank_ranked top[6];
  size_t n = 0;
  EXPECT(dashrank_space_top_k(model, matrix, cands, 5, top, 6, &n), DASHRANK_STATUS_OK);
  int defaults = 0;
  for (size_t i = 0; i < n; i++) defaults += top[i].is_default;
  TRUE(n >= 5 && n <= 6 && defaults == 1);
  for (size_t i = 0; i + 1 < n && i < 4; i++) TRUE(top[i].rank == i + 1);
  EXPECT(dashrank_space_top_k(model, matrix, cands, 5, top, 2, &need),
         DASHRANK_STATUS_INSUFFICIENT_SIZE);
  TRUE(need == n);

  /* Two threads ranking one handle agree bit for bit. */
  job jobs[2] = {{model, matrix, cands, {{0}}, 0, DASHRANK_STATUS_PANIC},
                 {model, matrix, cands, {{0}}, 0, DASHRANK_STATUS_PANIC}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, rank_job, &jobs[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  TRUE(jobs[0].st == DASHRANK_STATUS_OK && jobs[1].st == DASHRANK_STATUS_OK);
  TRUE(jobs[0].n == n && memcmp(jobs[0].out, jobs[1].out, n * sizeof top[0]) == 0);

  /* Tuning: failed measurements are skipped; capacity is checked before measuring. */
  counter cnt = {0, 0};
  dashrank_tune_result res;
  dashrank_measurement ms[6];
  EXPECT(dashrank_space_tune(model, matrix, cands, 5, "m", flaky, &cnt, &res, ms, 2, &need),
         DASHRANK_STATUS_INSUFFICIENT_SIZE);
  TRUE(cnt.calls == 0 && need == 6);
  EXPECT(dashrank_space_tune(model, matrix, cands, 5, "m", flaky, &cnt, &res, ms, 6, &n),
         DASHRANK_STATUS_OK);
  TRUE((size_t)cnt.calls == n && res.measured == n && res.failed == n / 2);
  TRUE(res.has_best && res.best_ms >= 1.0 && res.default_index == def);
  TRUE(ms[n - 1].ranked.is_default || defaults == 1);
  for (size_t i = 0; i < n; i++) TRUE(ms[i].ok == !isnan(ms[i].ms));
  EXPECT(dashrank_space_tune(model, matrix, cands, 2, NULL, negative, NULL, &res, NULL, 0, &n),
         DASHRANK_STATUS_OK);
  TRUE(!res.has_best && res.failed == n && isnan(res.speedup_over_default));
  EXPECT(dashrank_space_tune(model, matrix, cands, 2, NULL, NULL, NULL, &res, NULL, 0, NULL),
         DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_tune(model, matrix, cands, 2, NULL, flaky, &cnt, NULL, NULL, 0, NULL),
         DASHRANK_STATUS_NULL_ARGUMENT);

  /* A small TACO space: the default is injected when WACO's lists do not contain it. */
  EXPECT(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, 2, 2, &taco), DASHRANK_STATUS_OK);
  dashrank_space_candidates *tc = NULL;
  EXPECT(dashrank_space_prepare(model, "cpu-taco/spmm", taco, matrix, &tc), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_len(tc, &len, &ranked), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_default(tc, &def), DASHRANK_STATUS_OK);
  TRUE(def == len - 1);
  EXPECT(dashrank_space_candidates_render(tc, def, NULL, text, sizeof text, NULL),
         DASHRANK_STATUS_OK);
  /* The default renders as TACO's own CSR program. */
  TRUE(strncmp(text, "taco \"C(i,j)=A(i,k)*B(k,j)\" -f=C:dd -f=A:ds ", 40) == 0);
  TRUE(strstr(text, "-s=\"parallelize(i,CPUThread,NoRaces)\"") != NULL);

  EXPECT(dashrank_space_candidates_free(&tc), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_free(&cands), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_free(&cands), DASHRANK_STATUS_OK); /* NULL slot */
  EXPECT(dashrank_space_free(&space), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_free(&taco), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  TRUE(space == NULL && taco == NULL && cands == NULL);
  dashrank_matrix_free(&matrix);
  dashrank_model_release(&model);
  if (failures) {
    fprintf(stderr, "space_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("space_test: ok\n");
  return 0;
}
