/* C-side ABI test: misuse paths return codes (never crash), and one model shared by
 * several pthreads gives results bit-identical to a single-threaded run.
 *
 *   abi_test MODEL_DIR MATRIX.mtx [THREADS]
 */
#include <dashrank.h>

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

#define NCAND 64
static char lines_buf[NCAND][96];
static const char *lines[NCAND];

static void make_lines(void) {
  static const int S[] = {1, 4, 16, 32};
  static const char *O[] = {"i1 k1 i0 k0 j1 j0", "k1 i1 k0 i0 j1 j0"};
  int n = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int o = 0; o < 2; o++)
        for (int f = 0; f < 2; f++) {
          snprintf(lines_buf[n], 96, "%d %d 8 %s 1 %d 0 0 i1 48 16", S[a], S[b], O[o], f);
          lines[n] = lines_buf[n];
          n++;
        }
}

/* Tridiagonal n x n pattern plus a seeded diagonal band: different per seed. */
static void pattern(int seed, int n, int32_t *rp, int32_t *ci, int *nnz) {
  int k = 0;
  rp[0] = 0;
  for (int r = 0; r < n; r++) {
    for (int c = r - 1; c <= r + 1; c++)
      if (c >= 0 && c < n) ci[k++] = c;
    int far = (r * 7 + seed * 13) % n;
    if (far < r - 1 || far > r + 1) ci[k++] = far;
    rp[r + 1] = k;
  }
  *nnz = k;
}

typedef struct {
  const dashrank_model *model;
  const dashrank_candidates *cands;
  float scores[8][NCAND];
  int ok;
} job;

static void run_job(job *j) {
  int32_t rp[201], ci[800];
  j->ok = 1;
  for (int seed = 0; seed < 8; seed++) {
    int n = 60 + 17 * seed, nnz = 0;
    pattern(seed, n, rp, ci, &nnz);
    dashrank_matrix *m = NULL;
    if (dashrank_matrix_embed_csr_i32(j->model, (size_t)n, (size_t)n, rp, ci, (size_t)nnz, &m) !=
            DASHRANK_STATUS_OK ||
        dashrank_score(j->model, m, j->cands, j->scores[seed], NCAND, NULL) != DASHRANK_STATUS_OK)
      j->ok = 0;
    dashrank_matrix_free(&m);
  }
}

static void *thread_main(void *arg) {
  run_job(arg);
  return NULL;
}

static void misuse(dashrank_model *model, const dashrank_candidates *cands, const char *mtx) {
  dashrank_model *m = NULL;
  dashrank_matrix *x = NULL;
  dashrank_candidates *c = NULL;
  size_t n = 0, needed = 0;
  char buf[8];
  float scores[4];
  uint32_t idx[2];
  int32_t rp[] = {0, 2}, dup[] = {1, 1};

  EXPECT(dashrank_model_load(NULL, NULL, &m), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_load("/nonexistent", NULL, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_load("/nonexistent/bundle", NULL, &m), DASHRANK_STATUS_IO);
  EXPECT(dashrank_model_head_count(NULL, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_name(model, 0, buf, sizeof buf, &needed),
         DASHRANK_STATUS_INSUFFICIENT_SIZE);
  if (needed != strlen("cpu-taco/spmm") + 1) {
    fprintf(stderr, "FAIL: needed %zu\n", needed);
    failures++;
  }
  EXPECT(dashrank_model_head_name(model, 3, buf, sizeof buf, NULL),
         DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_matrix_embed_csr_i32(model, 1, 3, rp, dup, 2, &x), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(model, 1, 3, NULL, dup, 2, &x),
         DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_file(model, "/nonexistent/m.mtx", &x), DASHRANK_STATUS_IO);
  EXPECT(dashrank_matrix_embed_file(model, "m.unknown", &x), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_candidates_prepare(model, "no/head", lines, 1, &c), DASHRANK_STATUS_UNKNOWN_HEAD);
  EXPECT(dashrank_candidates_prepare(model, "\xff", lines, 1, &c), DASHRANK_STATUS_INVALID_UTF8);
  EXPECT(dashrank_candidates_status(cands, NCAND, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  dashrank_status st = DASHRANK_STATUS_OK;
  EXPECT(dashrank_candidates_status(cands, NCAND, &st), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  const char *bad_lines[] = {"3 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16"};
  EXPECT(dashrank_candidates_prepare(model, "cpu-taco/spmm", bad_lines, 1, &c), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_status(c, 0, &st), DASHRANK_STATUS_OK);
  if (st != DASHRANK_STATUS_SCHEDULE) {
    fprintf(stderr, "FAIL: candidate status %u\n", (unsigned)st);
    failures++;
  }
  dashrank_candidates_free(&c);

  EXPECT(dashrank_matrix_embed_file(model, mtx, &x), DASHRANK_STATUS_OK);
  EXPECT(dashrank_score(model, x, cands, scores, 4, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
  if (n != NCAND) failures++;
  EXPECT(dashrank_top_k(model, x, cands, 5, idx, NULL, 2, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
  EXPECT(dashrank_top_k(model, x, NULL, 5, idx, NULL, 2, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_free(&x), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_free(&x), DASHRANK_STATUS_OK); /* already NULL: no-op */
  EXPECT(dashrank_matrix_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);

  dashrank_load_options opts;
  memset(&opts, 0, sizeof opts);
  EXPECT(dashrank_model_load("/nonexistent", &opts, &m), DASHRANK_STATUS_ABI_MISMATCH);
  EXPECT(dashrank_load_options_init(&opts), DASHRANK_STATUS_OK);
  opts.backend = 42;
  EXPECT(dashrank_model_load("/nonexistent", &opts, &m), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_set_log_callback(NULL, NULL, 99), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_status_message(DASHRANK_STATUS_PATTERN, NULL, 0, &needed),
         DASHRANK_STATUS_INSUFFICIENT_SIZE);
  EXPECT(dashrank_status_message(12345, NULL, 0, &needed), DASHRANK_STATUS_INVALID_ARGUMENT);
  if (m != NULL || x != NULL || c != NULL) {
    fprintf(stderr, "FAIL: an out-pointer was not NULL after a failure\n");
    failures++;
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR MATRIX.mtx [THREADS]\n", argv[0]);
    return 2;
  }
  int nthreads = argc > 3 ? atoi(argv[3]) : 4;
  if (nthreads < 1 || nthreads > 16) nthreads = 4;
  make_lines();

  dashrank_model *model = NULL;
  dashrank_candidates *cands = NULL;
  EXPECT(dashrank_model_load(argv[1], NULL, &model), DASHRANK_STATUS_OK);
  if (!model) return 1;
  EXPECT(dashrank_candidates_prepare(model, "cpu-taco/spmm", lines, NCAND, &cands),
         DASHRANK_STATUS_OK);
  if (!cands) return 1;

  misuse(model, cands, argv[2]);

  /* Single-threaded reference, then the same work on N threads sharing model + cands. Each
   * thread takes its own model reference, as a host that hands the model to workers would. */
  static job reference, jobs[16];
  reference.model = model;
  reference.cands = cands;
  run_job(&reference);
  int differ = 0;
  pthread_t tid[16];
  for (int t = 0; t < nthreads; t++) {
    jobs[t].model = dashrank_model_retain(model);
    jobs[t].cands = cands;
    pthread_create(&tid[t], NULL, thread_main, &jobs[t]);
  }
  for (int t = 0; t < nthreads; t++) {
    pthread_join(tid[t], NULL);
    dashrank_model *mine = (dashrank_model *)jobs[t].model;
    dashrank_model_release(&mine);
    if (!jobs[t].ok || memcmp(jobs[t].scores, reference.scores, sizeof reference.scores) != 0) {
      fprintf(stderr, "FAIL: thread %d results differ from the single-threaded run\n", t);
      failures++;
      differ++;
    }
  }
  if (!reference.ok) failures++;
  printf("threads: %d threads x 8 matrices x %d candidates, identical to 1 thread: %s\n",
         nthreads, NCAND, differ ? "NO" : "yes");

  dashrank_candidates_free(&cands);
  dashrank_model_release(&model);
  if (model != NULL) failures++;
  printf("abi_test: %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
