/* A TACO-style tuning driver in C: read a matrix, enumerate TACO's SpMM schedule space for it
 * (WACO's SuperSchedule space, the toolchain default included), rank it with a dashrank cost
 * model, print the TACO commands of the top 5 and of the default, then tune: measure the top
 * k and the default through a callback and keep the fastest.
 *
 *   taco_driver MODEL_DIR MATRIX.mtx|MATRIX.csr [K] [MAX_SPLIT]
 *
 * MAX_SPLIT (a power of two) cuts WACO's split and chunk lists, e.g. 4 gives 7 776 schedules
 * instead of 611 712, for quick runs under valgrind; without it the whole space is ranked.
 *
 * The measure callback stands in for "compile the TACO command with TACO and time it", which
 * needs TACO itself: it times a real blocked CSR SpMM (C = A * B, B dense with 32 columns) on
 * the matrix, with the candidate's row split and dense-column split read back from its TACO
 * text. That kernel only implements row-outer loop orders, so it reports a failed
 * measurement for a schedule whose reorder() puts k1 before i1; dashrank skips those. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <dashrank.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                       \
  do {                                                                    \
    dashrank_status s_ = (call);                                          \
    if (s_ != DASHRANK_STATUS_OK) {                                       \
      char msg_[512];                                                     \
      dashrank_last_error_message(msg_, sizeof msg_, NULL);               \
      fprintf(stderr, "%s:%d: %s failed: status %u: %s\n", __FILE__,      \
              __LINE__, #call, (unsigned)s_, msg_);                       \
      goto fail;                                                          \
    }                                                                     \
  } while (0)

/* --- matrices: Matrix Market (coordinate) or WACO binary .csr, into int32 CSR ----------- */
typedef struct {
  int32_t nrows, ncols, nnz;
  int32_t *row_ptr, *col_idx;
} csr32;

static int cmp_key(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (*x > *y) - (*x < *y);
}

static int read_mtx(const char *path, csr32 *m) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[1024];
  int symmetric = 0, header = 0;
  long r = 0, c = 0, n = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '%') {
      if (!header && strstr(line, "symmetric")) symmetric = 1;
      header = 1;
      continue;
    }
    if (sscanf(line, "%ld %ld %ld", &r, &c, &n) == 3) break;
  }
  if (r <= 0 || c <= 0 || n < 0) {
    fclose(f);
    fprintf(stderr, "%s: bad size line\n", path);
    return -1;
  }
  /* (row << 32 | col) keys, sorted, give CSR order; duplicates are dropped. */
  int64_t *keys = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));
  long k = 0;
  for (long e = 0; e < n && fgets(line, sizeof line, f);) {
    long i, j;
    if (line[0] == '%' || sscanf(line, "%ld %ld", &i, &j) != 2) continue;
    e++;
    keys[k++] = ((int64_t)(i - 1) << 32) | (int64_t)(j - 1);
    if (symmetric && i != j) keys[k++] = ((int64_t)(j - 1) << 32) | (int64_t)(i - 1);
  }
  fclose(f);
  qsort(keys, (size_t)k, sizeof(int64_t), cmp_key);
  m->nrows = (int32_t)r;
  m->ncols = (int32_t)c;
  m->row_ptr = calloc((size_t)r + 1, sizeof(int32_t));
  m->col_idx = malloc(sizeof(int32_t) * (size_t)(k + 1));
  int32_t nnz = 0;
  for (long e = 0; e < k; e++) {
    if (e > 0 && keys[e] == keys[e - 1]) continue;
    int32_t i = (int32_t)(keys[e] >> 32);
    m->col_idx[nnz++] = (int32_t)(keys[e] & 0xffffffff);
    m->row_ptr[i + 1]++;
  }
  for (int32_t i = 0; i < m->nrows; i++) m->row_ptr[i + 1] += m->row_ptr[i];
  m->nnz = nnz;
  free(keys);
  return 0;
}

/* WACO .csr: little-endian int32 nrows, ncols, nnz, row_ptr[nrows + 1], col_idx[nnz]. */
static int read_waco_csr(const char *path, csr32 *m) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  int32_t h[3];
  int ok = fread(h, sizeof h[0], 3, f) == 3 && h[0] > 0 && h[1] > 0 && h[2] >= 0;
  if (ok) {
    m->nrows = h[0], m->ncols = h[1], m->nnz = h[2];
    m->row_ptr = malloc(sizeof(int32_t) * ((size_t)h[0] + 1));
    m->col_idx = malloc(sizeof(int32_t) * ((size_t)h[2] + 1));
    ok = fread(m->row_ptr, sizeof(int32_t), (size_t)h[0] + 1, f) == (size_t)h[0] + 1 &&
         fread(m->col_idx, sizeof(int32_t), (size_t)h[2], f) == (size_t)h[2];
  }
  fclose(f);
  if (!ok) fprintf(stderr, "%s: truncated or malformed WACO .csr\n", path);
  return ok ? 0 : -1;
}

/* --- the measure callback ---------------------------------------------------------------- */
#define DENSE_COLS 32

typedef struct {
  const csr32 *a;
  float *b, *c; /* B: ncols x DENSE_COLS, C: nrows x DENSE_COLS, row-major */
  int calls;
} bench;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The factor of "-s=split(<axis>,...,<factor>)" in a TACO schedule text, or 0. */
static int split_of(const char *text, char axis) {
  char pat[16];
  snprintf(pat, sizeof pat, "split(%c,", axis);
  const char *p = strstr(text, pat);
  if (!p) return 0;
  p = strchr(p, ')');
  while (p && p > text && p[-1] != ',') p--;
  return p ? atoi(p) : 0;
}

/* Blocked CSR SpMM with the candidate's row block (isplit) and dense-column tile (jsplit). */
static bool measure_spmm(void *user_data, const dashrank_measure_request *req, double *out_ms) {
  bench *bm = user_data;
  bm->calls++;
  const char *order = strstr(req->toolchain, "reorder(");
  if (!order || strstr(order, "k1") < strstr(order, "i1")) return false; /* k-outer: unsupported */
  int is = split_of(req->toolchain, 'i'), js = split_of(req->toolchain, 'j');
  if (is <= 0 || js <= 0) return false;
  if (js > DENSE_COLS) js = DENSE_COLS;
  const csr32 *a = bm->a;
  double best = 1e300;
  for (int rep = 0; rep < 3; rep++) {
    memset(bm->c, 0, sizeof(float) * (size_t)a->nrows * DENSE_COLS);
    double t0 = now_ms();
    for (int32_t ib = 0; ib < a->nrows; ib += is)
      for (int jb = 0; jb < DENSE_COLS; jb += js)
        for (int32_t i = ib; i < ib + is && i < a->nrows; i++)
          for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
            const float *brow = bm->b + (size_t)a->col_idx[p] * DENSE_COLS;
            float *crow = bm->c + (size_t)i * DENSE_COLS;
            for (int j = jb; j < jb + js && j < DENSE_COLS; j++) crow[j] += brow[j];
          }
    double t = now_ms() - t0;
    if (t < best) best = t;
  }
  *out_ms = best;
  return true;
}

/* --- printing ---------------------------------------------------------------------------- */
static char *render(const dashrank_space_candidates *c, size_t i, const char *name) {
  size_t need = 0;
  if (dashrank_space_candidates_render(c, i, name, NULL, 0, &need) !=
      DASHRANK_STATUS_INSUFFICIENT_SIZE)
    return NULL;
  char *buf = malloc(need);
  if (buf && dashrank_space_candidates_render(c, i, name, buf, need, NULL) != DASHRANK_STATUS_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* A TACO schedule text, one command per line. */
static void print_taco(const char *text) {
  const char *p = text;
  while (*p) {
    const char *end = strchr(p, ' ');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    printf("      %.*s\n", (int)n, p);
    p += n;
    while (*p == ' ') p++;
  }
}

static void print_entry(const dashrank_space_candidates *c, const dashrank_ranked *e,
                        const char *name) {
  char *text = render(c, e->index, name);
  if (e->rank)
    printf("  #%zu (candidate %zu)%s score %.5f\n", e->rank, e->index,
           e->is_default ? " [TACO default]" : "", e->score);
  else
    printf("  candidate %zu [TACO default], no score (the head's schema rejects it)\n", e->index);
  if (text) print_taco(text);
  free(text);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR MATRIX.mtx|MATRIX.csr [K] [MAX_SPLIT]\n", argv[0]);
    return 2;
  }
  size_t k = argc > 3 ? (size_t)atoi(argv[3]) : 5;
  uint32_t max_split = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
  int rc = 1;
  dashrank_model *model = NULL;
  dashrank_matrix *matrix = NULL;
  dashrank_space *space = NULL;
  dashrank_space_candidates *cands = NULL;
  dashrank_ranked *top = NULL;
  dashrank_measurement *ms = NULL;
  csr32 csr = {0};
  bench bm = {&csr, NULL, NULL, 0};

  if (dashrank_abi_version() != DASHRANK_ABI_VERSION) {
    fprintf(stderr, "ABI mismatch: header %u, library %u\n", DASHRANK_ABI_VERSION,
            dashrank_abi_version());
    return 1;
  }
  printf("dashrank %s (ABI %u)\n", dashrank_version(), dashrank_abi_version());
  dashrank_load_options opts;
  CHECK(dashrank_load_options_init(&opts));
  opts.deterministic = true;
  CHECK(dashrank_model_load(argv[1], &opts, &model));
  char desc[256];
  CHECK(dashrank_model_describe(model, desc, sizeof desc, NULL));
  printf("model %s\n", desc);

  const char *path = argv[2];
  size_t plen = strlen(path);
  int is_csr = plen > 4 && strcmp(path + plen - 4, ".csr") == 0;
  if ((is_csr ? read_waco_csr(path, &csr) : read_mtx(path, &csr)) != 0) goto fail;
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  printf("matrix %s: %d x %d, %d nonzeros\n", name, csr.nrows, csr.ncols, csr.nnz);
  CHECK(dashrank_matrix_embed_csr_i32(model, (size_t)csr.nrows, (size_t)csr.ncols, csr.row_ptr,
                                      csr.col_idx, (size_t)csr.nnz, &matrix));

  /* TACO's SpMM space, for this matrix, prepared for the model's cpu-taco/spmm head. */
  if (max_split)
    CHECK(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, max_split, max_split, &space));
  else
    CHECK(dashrank_space_new(DASHRANK_TARGET_CPU_TACO, DASHRANK_KERNEL_SPMM, 0, &space));
  CHECK(dashrank_space_prepare(model, NULL, space, matrix, &cands));
  size_t len = 0, ranked = 0, def = 0, states[4] = {0};
  CHECK(dashrank_space_candidates_len(cands, &len, &ranked));
  CHECK(dashrank_space_candidates_default(cands, &def));
  for (size_t i = 0; i < len; i++) {
    dashrank_candidate_info info;
    CHECK(dashrank_space_candidates_info(cands, i, &info));
    if (info.state < 4) states[info.state]++;
  }
  printf("TACO SpMM space: %zu schedules, %zu ranked, %zu duplicates for this matrix, %zu "
         "invalid; TACO default = candidate %zu\n",
         len, ranked, states[DASHRANK_CANDIDATE_DUPLICATE],
         states[DASHRANK_CANDIDATE_INVALID_FOR_MATRIX] + states[DASHRANK_CANDIDATE_INVALID_SCHEDULE],
         def);

  /* The top 5 and the default, as TACO commands. */
  size_t n = 0, cap = 6;
  top = calloc(cap, sizeof *top);
  CHECK(dashrank_space_top_k(model, matrix, cands, 5, top, cap, &n));
  printf("top 5 (lower score = predicted faster) and the TACO default:\n");
  for (size_t r = 0; r < n; r++) print_entry(cands, &top[r], name);

  /* Tune: measure the top k and the default, keep the fastest. */
  bm.b = malloc(sizeof(float) * (size_t)csr.ncols * DENSE_COLS);
  bm.c = malloc(sizeof(float) * (size_t)csr.nrows * DENSE_COLS);
  for (size_t i = 0; i < (size_t)csr.ncols * DENSE_COLS; i++) bm.b[i] = (float)(i % 7) * 0.25f;
  size_t most = (k < ranked ? k : ranked) + 1, taken = 0;
  ms = calloc(most, sizeof *ms);
  dashrank_tune_result result;
  CHECK(dashrank_space_tune(model, matrix, cands, k, name, measure_spmm, &bm, &result, ms, most,
                            &taken));
  printf("tuning: %zu measured (%d callback calls), %zu failed and skipped\n", result.measured,
         bm.calls, result.failed);
  for (size_t i = 0; i < taken; i++) {
    if (ms[i].ok)
      printf("  candidate %zu%s: %.3f ms\n", ms[i].ranked.index,
             ms[i].ranked.is_default ? " [TACO default]" : "", ms[i].ms);
    else
      printf("  candidate %zu%s: not measured (k-outer order; this driver's kernel is row-outer)\n",
             ms[i].ranked.index, ms[i].ranked.is_default ? " [TACO default]" : "");
  }
  if (result.has_best) {
    printf("fastest: candidate %zu, %.3f ms", result.best_index, result.best_ms);
    if (!isnan(result.speedup_over_default))
      printf(" (%.2fx the TACO default's %.3f ms)", result.speedup_over_default, result.default_ms);
    printf("\n");
    dashrank_ranked best = {result.best_index, 0.0f, 0, result.best_index == def};
    for (size_t i = 0; i < taken; i++)
      if (ms[i].ranked.index == result.best_index) best = ms[i].ranked;
    print_entry(cands, &best, name);
  } else {
    printf("no candidate could be measured\n");
  }
  rc = 0;

fail:
  dashrank_space_candidates_free(&cands);
  dashrank_space_free(&space);
  dashrank_matrix_free(&matrix);
  dashrank_model_release(&model);
  free(top);
  free(ms);
  free(bm.b);
  free(bm.c);
  free(csr.row_ptr);
  free(csr.col_idx);
  return rc;
}
