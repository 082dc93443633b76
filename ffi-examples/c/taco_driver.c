/* A lowering-pass driver in the style of TACO: read a matrix, enumerate candidate SpMM
 * SuperSchedules, rank them with a dashrank cost model, and print the best ones as TACO
 * scheduling commands.
 *
 *   taco_driver MODEL_DIR MATRIX.mtx|MATRIX.csr [TOP_K]
 *
 * A .mtx file is read here into int32 CSR arrays (as TACO holds them) and passed to
 * dashrank_matrix_embed_csr_i32; any other file goes through dashrank_matrix_embed_file.
 *
 * SuperSchedule (WACO SpMM, C(i,j) = A(i,k) * B(k,j)), 16 tokens:
 *   isplit ksplit jsplit | order of {i1,i0,k1,k0,j1,j0} | i1f i0f k1f k0f | paridx parnum parchunk
 * Mapping to TACO (split(parent, outer, inner, inner_size); WACO names the outer loop x1):
 *   split(i,i1,i0,isplit) split(k,k1,k0,ksplit) split(j,j1,j0,jsplit) reorder(order...)
 *   parallelize(paridx,CPUThread,NoRaces) with taco_set_parallel_schedule(Dynamic, parchunk)
 *   and parnum threads. The format bits describe A as a 4-level blocked tensor over
 *   (i1,i0,k1,k0), 1 = Dense (uncompressed), 0 = Sparse (compressed); WACO builds it with its
 *   own FormatScheduler, there is no single stock TACO command for that step. */
#include <dashrank.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* --- a minimal Matrix Market reader (coordinate; general or symmetric) --------------- */
typedef struct {
  int32_t nrows, ncols, nnz;
  int32_t *row_ptr, *col_idx;
} csr32;

static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
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
  qsort(keys, (size_t)k, sizeof(int64_t), cmp_pair);
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

/* --- candidate SuperSchedules ---------------------------------------------------------- */
static const int ISPLIT[] = {4, 16, 32};
static const int KSPLIT[] = {1, 8, 32};
static const int JSPLIT[] = {1, 8, 32};
/* WACO's generator keeps i1 before i0, k1 before k0, j1 before j0, j0 innermost. */
static const char *ORDERS[] = {"i1 k1 i0 k0 j1 j0", "i1 k1 j1 i0 k0 j0", "k1 i1 k0 i0 j1 j0"};
static const char *FORMATS[] = {"1 0 0 0", "1 1 0 0", "1 1 1 0"};
static const int CHUNKS[] = {1, 16, 64};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static char **enumerate(size_t *count) {
  size_t total = N(ISPLIT) * N(KSPLIT) * N(JSPLIT) * N(ORDERS) * N(FORMATS) * N(CHUNKS) + 1;
  char **lines = calloc(total, sizeof(char *));
  size_t n = 0;
  for (size_t a = 0; a < N(ISPLIT); a++)
    for (size_t b = 0; b < N(KSPLIT); b++)
      for (size_t c = 0; c < N(JSPLIT); c++)
        for (size_t o = 0; o < N(ORDERS); o++)
          for (size_t f = 0; f < N(FORMATS); f++)
            for (size_t h = 0; h < N(CHUNKS); h++) {
              lines[n] = malloc(96);
              snprintf(lines[n], 96, "%d %d %d %s %s i1 48 %d", ISPLIT[a], KSPLIT[b],
                       JSPLIT[c], ORDERS[o], FORMATS[f], CHUNKS[h]);
              n++;
            }
  /* One deliberately invalid candidate (3 is not a power of two): it gets its own status. */
  lines[n] = malloc(96);
  snprintf(lines[n], 96, "3 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16");
  n++;
  *count = n;
  return lines;
}

static void print_taco(const char *line) {
  char order[6][4], fmt[4][4], par[4];
  int is, ks, js, num, chunk;
  if (sscanf(line, "%d %d %d %3s %3s %3s %3s %3s %3s %3s %3s %3s %3s %3s %d %d", &is, &ks, &js,
             order[0], order[1], order[2], order[3], order[4], order[5], fmt[0], fmt[1], fmt[2],
             fmt[3], par, &num, &chunk) != 16)
    return;
  printf("    split(i,i1,i0,%d) split(k,k1,k0,%d) split(j,j1,j0,%d)\n", is, ks, js);
  printf("    reorder(%s,%s,%s,%s,%s,%s)\n", order[0], order[1], order[2], order[3], order[4],
         order[5]);
  printf("    parallelize(%s,CPUThread,NoRaces)  // taco_set_parallel_schedule(Dynamic,%d), %d "
         "threads\n",
         par, chunk, num);
  const char *lv[] = {"i1", "i0", "k1", "k0"};
  printf("    // A format over (i1,i0,k1,k0):");
  for (int l = 0; l < 4; l++) printf(" %s=%s", lv[l], fmt[l][0] == '1' ? "Dense" : "Sparse");
  printf("\n");
}

static void on_log(void *user_data, dashrank_log_level level, const char *message, size_t len) {
  (void)len;
  ++*(int *)user_data;
  if (level <= DASHRANK_LOG_LEVEL_INFO) fprintf(stderr, "[dashrank] %s\n", message);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR MATRIX.mtx|MATRIX.csr [TOP_K]\n", argv[0]);
    return 2;
  }
  size_t k = argc > 3 ? (size_t)atoi(argv[3]) : 5;
  int rc = 1, log_count = 0;
  dashrank_model *model = NULL;
  dashrank_matrix *matrix = NULL;
  dashrank_candidates *cands = NULL;
  csr32 csr = {0};
  size_t n = 0;
  char **lines = NULL;
  uint32_t *idx = NULL;
  float *scores = NULL;

  if (dashrank_abi_version() != DASHRANK_ABI_VERSION) {
    fprintf(stderr, "ABI mismatch: header %u, library %u\n", DASHRANK_ABI_VERSION,
            dashrank_abi_version());
    return 1;
  }
  printf("dashrank %s (ABI %u)\n", dashrank_version(), dashrank_abi_version());
  CHECK(dashrank_set_log_callback(on_log, &log_count, DASHRANK_LOG_LEVEL_INFO));

  dashrank_load_options opts;
  CHECK(dashrank_load_options_init(&opts));
  opts.threads = 2;
  opts.deterministic = true;
  CHECK(dashrank_model_load(argv[1], &opts, &model));
  char desc[256];
  CHECK(dashrank_model_describe(model, desc, sizeof desc, NULL));
  char head[128];
  CHECK(dashrank_model_head_name(model, 0, head, sizeof head, NULL));
  printf("model %s, head %s\n", desc, head);

  const char *path = argv[2];
  size_t plen = strlen(path);
  if (plen > 4 && strcmp(path + plen - 4, ".mtx") == 0) {
    if (read_mtx(path, &csr) != 0) goto fail;
    printf("matrix %s: %d x %d, %d nonzeros (read by the driver)\n", path, csr.nrows, csr.ncols,
           csr.nnz);
    CHECK(dashrank_matrix_embed_csr_i32(model, (size_t)csr.nrows, (size_t)csr.ncols, csr.row_ptr,
                                        csr.col_idx, (size_t)csr.nnz, &matrix));
  } else {
    printf("matrix %s (read by dashrank)\n", path);
    CHECK(dashrank_matrix_embed_file(model, path, &matrix));
  }

  lines = enumerate(&n);
  CHECK(dashrank_candidates_prepare(model, head, (const char *const *)lines, n, &cands));
  size_t len = 0, valid = 0;
  CHECK(dashrank_candidates_len(cands, &len, &valid));
  printf("%zu candidate SuperSchedules, %zu valid\n", len, valid);
  for (size_t i = 0; i < len; i++) {
    dashrank_status st;
    CHECK(dashrank_candidates_status(cands, i, &st));
    if (st != DASHRANK_STATUS_OK) {
      char why[512];
      CHECK(dashrank_candidates_message(cands, i, why, sizeof why, NULL));
      printf("  rejected #%zu (status %u): %s\n", i, (unsigned)st, why);
    }
  }

  idx = calloc(k ? k : 1, sizeof *idx);
  scores = calloc(k ? k : 1, sizeof *scores);
  size_t written = 0;
  CHECK(dashrank_top_k(model, matrix, cands, k, idx, scores, k, &written));
  printf("top %zu (lower score = predicted faster):\n", written);
  for (size_t r = 0; r < written; r++) {
    printf("#%zu score %8.4f  [%s]\n", r + 1, scores[r], lines[idx[r]]);
    print_taco(lines[idx[r]]);
  }
  printf("log messages received: %d\n", log_count);
  rc = 0;

fail:
  dashrank_set_log_callback(NULL, NULL, 0);
  dashrank_candidates_free(&cands);
  dashrank_matrix_free(&matrix);
  dashrank_model_release(&model);
  if (lines)
    for (size_t i = 0; i < n; i++) free(lines[i]);
  free(lines);
  free(idx);
  free(scores);
  free(csr.row_ptr);
  free(csr.col_idx);
  return rc;
}
