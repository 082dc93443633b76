/* A TACO tuning driver in C: read a matrix, enumerate TACO's SpMM schedule space for it (WACO's
 * SuperSchedule space, the toolchain default included), rank it with a dashrank cost model,
 * print the stock `taco` command lines of the top 5 and of the default (TACO's CSR), then
 * tune: measure the top k and the default through a callback and keep the fastest.
 *
 *   DASHRANK_TACO_MEASURE=target/taco/dashrank-taco-measure \
 *     taco_driver MODEL_DIR MATRIX.mtx|MATRIX.csr [K] [MAX_SPLIT]
 *
 * MAX_SPLIT (a power of two) cuts WACO's split and chunk lists, e.g. 4 gives 7 776 schedules
 * instead of 611 712, for quick runs under valgrind; without it the whole space is ranked.
 *
 * The measure callback runs each candidate's command line through stock TACO with
 * dashrank-taco-measure (scripts/taco-tools.sh builds it; docs/taco.md): compiled by TACO,
 * checked against a CSR reference, timed. Without DASHRANK_TACO_MEASURE the driver ranks and
 * prints, and says it does not tune. */
#define _POSIX_C_SOURCE 200809L /* popen */
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
typedef struct {
  const char *measurer; /* dashrank-taco-measure */
  const char *matrix;
  int calls;
} bench;

/* Runs `measurer --matrix M --kernel spmm '<command line>'` and reads the milliseconds it prints. */
static bool measure_taco(void *user_data, const dashrank_measure_request *req, double *out_ms) {
  bench *bm = user_data;
  bm->calls++;
  size_t cap = strlen(req->toolchain) * 4 + strlen(bm->measurer) + strlen(bm->matrix) + 128;
  char *cmd = malloc(cap);
  if (!cmd) return false;
  int n = snprintf(cmd, cap, "'%s' --matrix '%s' --kernel spmm --repeats 9 '", bm->measurer, bm->matrix);
  for (const char *p = req->toolchain; *p && n < (int)cap - 8; p++) /* quote ' as '\'' */
    n += *p == '\'' ? snprintf(cmd + n, cap - (size_t)n, "'\\''") : snprintf(cmd + n, cap - (size_t)n, "%c", *p);
  snprintf(cmd + n, cap - (size_t)n, "' 2>/dev/null");
  FILE *out = popen(cmd, "r");
  free(cmd);
  if (!out) return false;
  double ms = -1;
  bool ok = fscanf(out, "%lf", &ms) == 1;
  ok = pclose(out) == 0 && ok && ms >= 0;
  if (ok) *out_ms = ms;
  return ok;
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

/* A `taco` command line. */
static void print_taco(const char *text) { printf("      %s\n", text); }

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

/* --- the steps of main ------------------------------------------------------------------- */
/* Checks the library against the header, prints its version and loads the model
 * (deterministic). */
static int load_model(const char *dir, dashrank_model **model) {
  if (dashrank_abi_version() != DASHRANK_ABI_VERSION) {
    fprintf(stderr, "ABI mismatch: header %u, library %u\n", DASHRANK_ABI_VERSION,
            dashrank_abi_version());
    return -1;
  }
  printf("dashrank %s (ABI %u)\n", dashrank_version(), dashrank_abi_version());
  dashrank_load_options opts;
  CHECK(dashrank_load_options_init(&opts));
  opts.deterministic = true;
  CHECK(dashrank_model_load(dir, &opts, model));
  char desc[256];
  CHECK(dashrank_model_describe(*model, desc, sizeof desc, NULL));
  printf("model %s\n", desc);
  return 0;
fail:
  return -1;
}

/* Reads the matrix at `path` (.csr: WACO binary, else Matrix Market) into `csr` and embeds it
 * for the model. */
static int read_and_embed_matrix(dashrank_model *model, const char *path, const char *name,
                                 csr32 *csr, dashrank_matrix **matrix) {
  size_t plen = strlen(path);
  int is_csr = plen > 4 && strcmp(path + plen - 4, ".csr") == 0;
  if ((is_csr ? read_waco_csr(path, csr) : read_mtx(path, csr)) != 0) return -1;
  printf("matrix %s: %d x %d, %d nonzeros\n", name, csr->nrows, csr->ncols, csr->nnz);
  CHECK(dashrank_matrix_embed_csr_i32(model, (size_t)csr->nrows, (size_t)csr->ncols, csr->row_ptr,
                                      csr->col_idx, (size_t)csr->nnz, matrix));
  return 0;
fail:
  return -1;
}

/* TACO's SpMM space (cut at `max_split`, or whole), for this matrix, prepared for the model's
 * cpu-taco/spmm head; prints its size and the states of its candidates. */
static int prepare_taco_space(dashrank_model *model, dashrank_matrix *matrix, uint32_t max_split,
                              dashrank_space **space, dashrank_space_candidates **cands,
                              size_t *ranked, size_t *def) {
  if (max_split)
    CHECK(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, max_split, max_split, space));
  else
    CHECK(dashrank_space_new(DASHRANK_TARGET_CPU_TACO, DASHRANK_KERNEL_SPMM, 0, space));
  CHECK(dashrank_space_prepare(model, NULL, *space, matrix, cands));
  size_t len = 0, states[4] = {0};
  CHECK(dashrank_space_candidates_len(*cands, &len, ranked));
  CHECK(dashrank_space_candidates_default(*cands, def));
  for (size_t i = 0; i < len; i++) {
    dashrank_candidate_info info;
    CHECK(dashrank_space_candidates_info(*cands, i, &info));
    if (info.state < 4) states[info.state]++;
  }
  printf("TACO SpMM space: %zu schedules, %zu ranked, %zu duplicates for this matrix, %zu "
         "invalid; TACO default = candidate %zu\n",
         len, *ranked, states[DASHRANK_CANDIDATE_DUPLICATE],
         states[DASHRANK_CANDIDATE_INVALID_FOR_MATRIX] + states[DASHRANK_CANDIDATE_INVALID_SCHEDULE],
         *def);
  return 0;
fail:
  return -1;
}

/* The top 5 and the default, as TACO commands. */
static int print_top5(dashrank_model *model, dashrank_matrix *matrix,
                      const dashrank_space_candidates *cands, const char *name) {
  size_t n = 0, cap = 6;
  dashrank_ranked *top = calloc(cap, sizeof *top);
  CHECK(dashrank_space_top_k(model, matrix, cands, 5, top, cap, &n));
  printf("top 5 (lower score = predicted faster) and the TACO default:\n");
  for (size_t r = 0; r < n; r++) print_entry(cands, &top[r], name);
  free(top);
  return 0;
fail:
  free(top);
  return -1;
}

/* Each measurement of a tuning: its time, or that it failed. */
static void print_measurements(const dashrank_measurement *ms, size_t taken) {
  for (size_t i = 0; i < taken; i++) {
    if (ms[i].ok)
      printf("  candidate %zu%s: %.3f ms\n", ms[i].ranked.index,
             ms[i].ranked.is_default ? " [TACO default]" : "", ms[i].ms);
    else
      printf("  candidate %zu%s: not measured (TACO or the check failed)\n", ms[i].ranked.index,
             ms[i].ranked.is_default ? " [TACO default]" : "");
  }
}

/* The fastest candidate of a tuning, its speedup over the default and its TACO command. */
static void print_fastest(const dashrank_space_candidates *cands, const dashrank_tune_result *result,
                          const dashrank_measurement *ms, size_t taken, size_t def,
                          const char *name) {
  if (!result->has_best) {
    printf("no candidate could be measured\n");
    return;
  }
  printf("fastest: candidate %zu, %.3f ms", result->best_index, result->best_ms);
  if (!isnan(result->speedup_over_default))
    printf(" (%.2fx the TACO default's %.3f ms)", result->speedup_over_default, result->default_ms);
  printf("\n");
  dashrank_ranked best = {result->best_index, 0.0f, 0, result->best_index == def};
  for (size_t i = 0; i < taken; i++)
    if (ms[i].ranked.index == result->best_index) best = ms[i].ranked;
  print_entry(cands, &best, name);
}

/* Tune: measure the top k and the default through stock TACO, keep the fastest (or say why
 * not, without a measurer). */
static int tune_with_taco(dashrank_model *model, dashrank_matrix *matrix,
                          const dashrank_space_candidates *cands, size_t k, size_t ranked,
                          size_t def, const char *name, bench *bm) {
  if (!bm->measurer) {
    printf("not tuning: set DASHRANK_TACO_MEASURE to dashrank-taco-measure (bash scripts/taco-tools.sh)\n");
    return 0;
  }
  size_t most = (k < ranked ? k : ranked) + 1, taken = 0;
  dashrank_measurement *ms = calloc(most, sizeof *ms);
  dashrank_tune_result result;
  CHECK(dashrank_space_tune(model, matrix, cands, k, name, measure_taco, bm, &result, ms, most,
                            &taken));
  printf("tuning with stock TACO: %zu measured (%d callback calls), %zu failed and skipped\n",
         result.measured, bm->calls, result.failed);
  print_measurements(ms, taken);
  print_fastest(cands, &result, ms, taken, def, name);
  free(ms);
  return 0;
fail:
  free(ms);
  return -1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR MATRIX.mtx|MATRIX.csr [K] [MAX_SPLIT]\n", argv[0]);
    return 2;
  }
  size_t k = argc > 3 ? (size_t)atoi(argv[3]) : 5;
  uint32_t max_split = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
  dashrank_model *model = NULL;
  dashrank_matrix *matrix = NULL;
  dashrank_space *space = NULL;
  dashrank_space_candidates *cands = NULL;
  csr32 csr = {0};
  bench bm = {getenv("DASHRANK_TACO_MEASURE"), argv[2], 0};
  const char *path = argv[2];
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t ranked = 0, def = 0;

  int ok = load_model(argv[1], &model) == 0 &&
           read_and_embed_matrix(model, path, name, &csr, &matrix) == 0 &&
           prepare_taco_space(model, matrix, max_split, &space, &cands, &ranked, &def) == 0 &&
           print_top5(model, matrix, cands, name) == 0 &&
           tune_with_taco(model, matrix, cands, k, ranked, def, name, &bm) == 0;

  dashrank_space_candidates_free(&cands);
  dashrank_space_free(&space);
  dashrank_matrix_free(&matrix);
  dashrank_model_release(&model);
  free(csr.row_ptr);
  free(csr.col_idx);
  return ok ? 0 : 1;
}
