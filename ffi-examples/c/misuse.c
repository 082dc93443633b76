/* C ABI misuse suite (run by scripts/ffi.sh plainly, under AddressSanitizer and under
 * valgrind). Every case is one row of the misuse matrix in docs/reliability.md:
 *
 *   - NULL for every pointer parameter of every export, one at a time;
 *   - zero and short output buffers (truncation, size reporting, nothing written past len);
 *   - double free and release through the same slot, handles outliving their model,
 *     reference counting;
 *   - out-of-range indices, bad enum values, invalid UTF-8, malformed CSR arrays, sizes that
 *     overflow;
 *   - 8 threads x 1000 calls sharing one model, every result compared bit for bit with a
 *     single-threaded reference.
 *
 * Misuse the library cannot detect (a handle of the wrong kind passed through a cast, a
 * handle used or freed after it was freed through another copy of the pointer, buffers
 * shorter than the length passed) is undefined behaviour, documented in dashrank.h, and is
 * not exercised here.
 *
 *   misuse MODEL_DIR OTHER_MODEL_DIR [THREADS] [CALLS_PER_THREAD]
 *
 * MODEL_DIR must have a cpu-taco/spmm head (WACO SuperSchedule lines); OTHER_MODEL_DIR is
 * any other bundle (used to check that a matrix is refused by a model that did not embed it).
 */
#include <dashrank.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define FAIL(...)                                \
  do {                                           \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                \
    fprintf(stderr, "\n");                       \
    failures++;                                  \
  } while (0)

/* The call returns `want`; a failure also leaves `want` and a message as the last error. */
#define EXPECT(call, want)                                                               \
  do {                                                                                   \
    dashrank_status got_ = (call);                                                       \
    checks++;                                                                            \
    if (got_ != (dashrank_status)(want)) {                                               \
      char m_[512] = "";                                                                 \
      dashrank_last_error_message(m_, sizeof m_, NULL);                                  \
      FAIL("%s -> %u, want %u (%s)", #call, (unsigned)got_, (unsigned)(want), m_);       \
    } else if (got_ != DASHRANK_STATUS_OK && dashrank_last_error_status() != got_) {     \
      FAIL("%s: last error status %u, want %u", #call,                                   \
           (unsigned)dashrank_last_error_status(), (unsigned)got_);                      \
    }                                                                                    \
  } while (0)

/* For dashrank_status_message, which leaves the thread's last error alone by design. */
#define EXPECT_KEEPS_LAST(call, want)                                                   \
  do {                                                                                   \
    dashrank_status got_ = (call);                                                       \
    checks++;                                                                            \
    if (got_ != (dashrank_status)(want))                                                 \
      FAIL("%s -> %u, want %u", #call, (unsigned)got_, (unsigned)(want));                \
  } while (0)

#define CHECK(cond)                   \
  do {                                \
    checks++;                         \
    if (!(cond)) FAIL("%s", #cond);   \
  } while (0)

static const char *LINES[] = {
    "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16",
    "32 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16",
    "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1",
    "4 16 1 k1 i1 k0 i0 j1 j0 1 1 0 0 i1 48 32",
};
#define NLINES 4
static const char *HEAD = "cpu-taco/spmm";

/* A banded n x n pattern shifted by `seed`: distinct matrices of very different sizes. */
static int band(int n, int seed, int32_t *rp, int32_t *ci) {
  int k = 0;
  rp[0] = 0;
  for (int r = 0; r < n; r++) {
    for (int c = r - 2; c <= r + 2; c++)
      if (c >= 0 && c < n) ci[k++] = c;
    int far = (r * 31 + seed * 17) % n;
    if (far < r - 2 || far > r + 2) ci[k++] = far;
    rp[r + 1] = k;
  }
  return k;
}

/* Deterministic (bit-identical scores under any load, see dashrank.h), no embedding cache:
 * every embed call runs the featurizer. */
static dashrank_model *load(const char *dir) {
  dashrank_load_options o;
  dashrank_model *m = NULL;
  EXPECT(dashrank_load_options_init(&o), DASHRANK_STATUS_OK);
  o.deterministic = true;
  o.matrix_cache_capacity = 0;
  EXPECT(dashrank_model_load(dir, &o, &m), DASHRANK_STATUS_OK);
  if (m == NULL) {
    fprintf(stderr, "cannot load %s\n", dir);
    exit(1);
  }
  return m;
}

/* --- 1. NULL for every pointer parameter --------------------------------------------- */

static void null_arguments_load_and_heads(dashrank_model *m, const char *dir) {
  dashrank_model *mo = (dashrank_model *)1;
  dashrank_load_options o;
  size_t n = 0, need = 0;
  uint32_t u = 0;
  char buf[256];

  EXPECT(dashrank_load_options_init(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_load(NULL, NULL, &mo), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(mo == NULL);
  EXPECT(dashrank_model_load(dir, NULL, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_load_options_init(&o), DASHRANK_STATUS_OK);
  o.backend = DASHRANK_BACKEND_ONNXRUNTIME; /* onnxruntime_library left NULL */
  mo = (dashrank_model *)1;
  EXPECT(dashrank_model_load(dir, &o, &mo), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(mo == NULL);
  CHECK(dashrank_model_retain(NULL) == NULL);
  EXPECT(dashrank_model_release(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  mo = NULL;
  EXPECT(dashrank_model_release(&mo), DASHRANK_STATUS_OK);

  EXPECT(dashrank_model_head_count(NULL, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_count(m, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_name(NULL, 0, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_name(m, 0, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_name(m, 0, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_head_polarity(NULL, 0, &u), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_head_polarity(m, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_describe(NULL, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_describe(m, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_model_describe(m, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
}

static void null_arguments_matrices(dashrank_model *m) {
  dashrank_matrix *xo = (dashrank_matrix *)1;
  int32_t rp32[] = {0, 1}, ci32[] = {0};
  int64_t rp64[] = {0, 1}, ci64[] = {0};

  EXPECT(dashrank_matrix_embed_csr_i32(NULL, 1, 1, rp32, ci32, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(xo == NULL);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 1, 1, NULL, ci32, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 1, 1, rp32, NULL, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 1, 1, rp32, ci32, 1, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i64(NULL, 1, 1, rp64, ci64, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i64(m, 1, 1, NULL, ci64, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i64(m, 1, 1, rp64, NULL, 1, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i64(m, 1, 1, rp64, ci64, 1, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  /* col_idx may be NULL when nnz is 0 (an empty matrix). */
  int32_t empty_rp[] = {0, 0, 0};
  EXPECT(dashrank_matrix_embed_csr_i32(m, 2, 2, empty_rp, NULL, 0, &xo), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_free(&xo), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_embed_file(NULL, "m.mtx", &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_file(m, NULL, &xo), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_embed_file(m, "m.mtx", NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

static void null_arguments_candidates(dashrank_model *m, dashrank_candidates *c) {
  dashrank_candidates *co = (dashrank_candidates *)1;
  size_t n = 0, need = 0;
  char buf[256];
  dashrank_status st;

  const char *with_null[] = {LINES[0], NULL};
  EXPECT(dashrank_candidates_prepare(NULL, HEAD, LINES, 1, &co), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(co == NULL);
  EXPECT(dashrank_candidates_prepare(m, NULL, LINES, 1, &co), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_prepare(m, HEAD, NULL, 1, &co), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_prepare(m, HEAD, with_null, 2, &co), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_prepare(m, HEAD, LINES, 1, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  /* lines may be NULL when n is 0 (an empty set). */
  EXPECT(dashrank_candidates_prepare(m, HEAD, NULL, 0, &co), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_len(co, &n, NULL), DASHRANK_STATUS_OK);
  CHECK(n == 0);
  EXPECT(dashrank_candidates_free(&co), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_len(NULL, &n, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_len(c, NULL, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_status(NULL, 0, &st), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_status(c, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_message(NULL, 0, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_message(c, 0, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_candidates_message(c, 0, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

static void null_arguments_scoring(dashrank_model *m, dashrank_matrix *x, dashrank_candidates *c) {
  size_t n = 0;
  uint32_t idx[4];
  float s[8];

  EXPECT(dashrank_score(NULL, x, c, s, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_score(m, NULL, c, s, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_score(m, x, NULL, s, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_score(m, x, c, NULL, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_score(m, x, c, s, 8, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_top_k(NULL, x, c, 2, idx, s, 4, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_top_k(m, NULL, c, 2, idx, s, 4, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_top_k(m, x, NULL, 2, idx, s, 4, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_top_k(m, x, c, 2, NULL, s, 4, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_top_k(m, x, c, 2, idx, NULL, 4, &n), DASHRANK_STATUS_OK); /* scores optional */
  EXPECT(dashrank_top_k(m, x, c, 2, idx, s, 4, NULL), DASHRANK_STATUS_OK);
}

static void null_arguments_messages(void) {
  size_t need = 0;
  char buf[256];

  EXPECT_KEEPS_LAST(dashrank_status_message(DASHRANK_STATUS_OK, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT_KEEPS_LAST(dashrank_status_message(DASHRANK_STATUS_OK, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
  CHECK(dashrank_last_error_message(NULL, sizeof buf, &need) == DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(dashrank_last_error_message(buf, sizeof buf, NULL) != DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(dashrank_version() != NULL && dashrank_abi_version() == DASHRANK_ABI_VERSION);
  EXPECT(dashrank_set_log_callback(NULL, NULL, 0), DASHRANK_STATUS_OK); /* NULL turns logging off */
}

static void null_arguments(dashrank_model *m, dashrank_matrix *x, dashrank_candidates *c,
                           const char *dir) {
  null_arguments_load_and_heads(m, dir);
  null_arguments_matrices(m);
  null_arguments_candidates(m, c);
  null_arguments_scoring(m, x, c);
  null_arguments_messages();
}

/* --- 2. Zero and short buffers -------------------------------------------------------- */

/* Calls a string-returning export with every length from 0 to the needed size + 1: short
 * lengths give INSUFFICIENT_SIZE, the needed size, a NUL-terminated prefix, and nothing
 * written at or past `len` (checked with a canary). */
typedef dashrank_status (*text_fn)(const void *ctx, char *buf, size_t len, size_t *needed);

static void text_lengths(const char *what, text_fn fn, const void *ctx) {
  char full[1024], buf[1024];
  size_t need = 0, need2 = 0;
  if (fn(ctx, NULL, 0, &need) != DASHRANK_STATUS_INSUFFICIENT_SIZE || need == 0 || need > sizeof full) {
    FAIL("%s: zero-length query (needed %zu)", what, need);
    return;
  }
  if (fn(ctx, full, need, &need2) != DASHRANK_STATUS_OK || need2 != need || strlen(full) + 1 != need) {
    FAIL("%s: exact-size buffer", what);
    return;
  }
  for (size_t len = 0; len <= need + 1; len++) {
    memset(buf, 0x5A, sizeof buf);
    dashrank_status st = fn(ctx, len ? buf : NULL, len, &need2);
    checks++;
    if (len < need) {
      if (st != DASHRANK_STATUS_INSUFFICIENT_SIZE || need2 != need) FAIL("%s: len %zu -> %u", what, len, (unsigned)st);
      if (len > 0 && (buf[len - 1] != 0 || strncmp(buf, full, len - 1) != 0)) FAIL("%s: len %zu prefix", what, len);
    } else if (st != DASHRANK_STATUS_OK || strcmp(buf, full) != 0) {
      FAIL("%s: len %zu -> %u", what, len, (unsigned)st);
    }
    if ((unsigned char)buf[len] != 0x5A && len < need) FAIL("%s: wrote past len %zu", what, len);
  }
}

typedef struct {
  const dashrank_model *m;
  const dashrank_candidates *c;
  size_t index;
  uint32_t code;
} text_ctx;

static dashrank_status head_name_fn(const void *p, char *b, size_t l, size_t *n) {
  const text_ctx *t = p;
  return dashrank_model_head_name(t->m, t->index, b, l, n);
}
static dashrank_status describe_fn(const void *p, char *b, size_t l, size_t *n) {
  return dashrank_model_describe(((const text_ctx *)p)->m, b, l, n);
}
static dashrank_status message_fn(const void *p, char *b, size_t l, size_t *n) {
  const text_ctx *t = p;
  return dashrank_candidates_message(t->c, t->index, b, l, n);
}
static dashrank_status status_fn(const void *p, char *b, size_t l, size_t *n) {
  return dashrank_status_message(((const text_ctx *)p)->code, b, l, n);
}
static dashrank_status last_error_fn(const void *p, char *b, size_t l, size_t *n) {
  (void)p;
  return dashrank_last_error_message(b, l, n);
}

static void buffers(dashrank_model *m, dashrank_matrix *x, dashrank_candidates *c,
                    dashrank_candidates *bad) {
  text_ctx t = {m, c, 0, DASHRANK_STATUS_PATTERN};
  text_lengths("head_name", head_name_fn, &t);
  text_lengths("describe", describe_fn, &t);
  text_lengths("status_message", status_fn, &t);
  t.c = bad; /* candidate 0 is invalid: a non-empty message */
  text_lengths("candidates_message", message_fn, &t);
  dashrank_model_head_count(NULL, NULL); /* leaves a last error to read */
  text_lengths("last_error_message", last_error_fn, &t);

  /* Scores: any len below the candidate count writes nothing and reports the count. */
  float s[NLINES + 1], ref[NLINES];
  size_t n = 0;
  EXPECT(dashrank_score(m, x, c, ref, NLINES, &n), DASHRANK_STATUS_OK);
  for (size_t len = 0; len < NLINES; len++) {
    for (size_t i = 0; i <= NLINES; i++) s[i] = -7.0f;
    n = 0;
    EXPECT(dashrank_score(m, x, c, len ? s : NULL, len, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
    CHECK(n == NLINES);
    for (size_t i = 0; i <= NLINES; i++) CHECK(s[i] == -7.0f);
  }
  /* Top-k: len below min(k, valid) fails without writing; len 0 with k 0 succeeds. */
  uint32_t idx[NLINES + 1];
  for (size_t len = 0; len < 3; len++) {
    for (size_t i = 0; i <= NLINES; i++) idx[i] = 0xDEADu;
    EXPECT(dashrank_top_k(m, x, c, 3, len ? idx : NULL, NULL, len, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
    CHECK(n == 3);
    for (size_t i = 0; i <= NLINES; i++) CHECK(idx[i] == 0xDEADu);
  }
  EXPECT(dashrank_top_k(m, x, c, 0, NULL, NULL, 0, &n), DASHRANK_STATUS_OK);
  CHECK(n == 0);
  EXPECT(dashrank_top_k(m, x, c, 100, idx, s, NLINES, &n), DASHRANK_STATUS_OK); /* k > count */
  CHECK(n == NLINES);
}

/* --- 3. Lifetimes: double free, release, handles outliving the model ----------------- */

static void lifetimes(const char *dir, const char *other_dir, dashrank_candidates *c) {
  dashrank_model *m = load(dir);
  dashrank_model *other = load(other_dir);
  int32_t rp[65], ci[400];
  int nnz = band(64, 1, rp, ci);
  dashrank_matrix *x = NULL, *y = NULL;
  dashrank_candidates *mine = NULL;
  EXPECT(dashrank_matrix_embed_csr_i32(m, 64, 64, rp, ci, (size_t)nnz, &x), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_prepare(m, HEAD, LINES, NLINES, &mine), DASHRANK_STATUS_OK);

  /* A matrix only scores with the model that embedded it. */
  float s[NLINES];
  EXPECT(dashrank_matrix_embed_csr_i32(other, 64, 64, rp, ci, (size_t)nnz, &y), DASHRANK_STATUS_OK);
  EXPECT(dashrank_score(m, y, c, s, NLINES, NULL), DASHRANK_STATUS_INVALID_ARGUMENT);

  /* Reference counting: two extra references, three releases, the handle works until the
   * last one; each release nulls only the slot it was given. */
  dashrank_model *r1 = dashrank_model_retain(m), *r2 = dashrank_model_retain(m);
  CHECK(r1 == m && r2 == m);
  EXPECT(dashrank_model_release(&m), DASHRANK_STATUS_OK);
  CHECK(m == NULL);
  EXPECT(dashrank_score(r1, x, mine, s, NLINES, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_release(&r1), DASHRANK_STATUS_OK);
  EXPECT(dashrank_score(r2, x, mine, s, NLINES, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_release(&r2), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_release(&r2), DASHRANK_STATUS_OK); /* same slot again: no-op */

  /* The matrix and candidate set outlive their model; freeing twice through the same
   * slot is a no-op. */
  EXPECT(dashrank_matrix_free(&x), DASHRANK_STATUS_OK);
  CHECK(x == NULL);
  EXPECT(dashrank_matrix_free(&x), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_free(&mine), DASHRANK_STATUS_OK);
  CHECK(mine == NULL);
  EXPECT(dashrank_candidates_free(&mine), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_free(&y), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_release(&other), DASHRANK_STATUS_OK);
}

/* --- 4. Bad values ------------------------------------------------------------------- */

static void bad_values(dashrank_model *m, dashrank_matrix *x, dashrank_candidates *c,
                       const char *dir) {
  dashrank_load_options o;
  dashrank_model *mo = NULL;
  dashrank_matrix *xo = NULL;
  dashrank_candidates *co = NULL;
  dashrank_status st;
  size_t n;
  char buf[32];
  uint32_t u;

  memset(&o, 0, sizeof o);
  EXPECT(dashrank_model_load(dir, &o, &mo), DASHRANK_STATUS_ABI_MISMATCH); /* not initialised */
  EXPECT(dashrank_load_options_init(&o), DASHRANK_STATUS_OK);
  o.abi_version += 1;
  EXPECT(dashrank_model_load(dir, &o, &mo), DASHRANK_STATUS_ABI_MISMATCH);
  EXPECT(dashrank_load_options_init(&o), DASHRANK_STATUS_OK);
  o.backend = 42;
  EXPECT(dashrank_model_load(dir, &o, &mo), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_model_load("\xff\xfe", NULL, &mo), DASHRANK_STATUS_INVALID_UTF8);
  EXPECT(dashrank_model_load("/nonexistent/bundle", NULL, &mo), DASHRANK_STATUS_IO);
  EXPECT(dashrank_model_load("ffi-examples", NULL, &mo), DASHRANK_STATUS_BUNDLE); /* no .onnx */
  CHECK(mo == NULL);
  EXPECT(dashrank_set_log_callback(NULL, NULL, 99), DASHRANK_STATUS_INVALID_ARGUMENT);

  EXPECT(dashrank_model_head_name(m, 99, buf, sizeof buf, NULL), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_model_head_name(m, SIZE_MAX, buf, sizeof buf, NULL), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_model_head_polarity(m, 99, &u), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_candidates_status(c, NLINES, &st), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_candidates_message(c, SIZE_MAX, buf, sizeof buf, NULL), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT_KEEPS_LAST(dashrank_status_message(12345, buf, sizeof buf, NULL), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT_KEEPS_LAST(dashrank_status_message(UINT32_MAX, buf, sizeof buf, NULL), DASHRANK_STATUS_INVALID_ARGUMENT);

  /* Malformed CSR arrays and sizes. */
  int32_t rp_neg[] = {0, -1}, rp_dec[] = {0, 2, 1}, rp_ok[] = {0, 1, 2}, ci_dup[] = {1, 1};
  int32_t ci_neg[] = {-1, 0}, ci_big[] = {0, 5};
  int64_t rp64[] = {0, (int64_t)1 << 40}, ci64[] = {0};
  EXPECT(dashrank_matrix_embed_csr_i32(m, 1, 2, rp_neg, ci_dup, 0, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 2, 2, rp_dec, ci_dup, 1, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 1, 2, rp_dec, ci_dup, 2, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 2, 2, rp_ok, ci_neg, 2, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 2, 2, rp_ok, ci_big, 2, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i64(m, 1, 1, rp64, ci64, 1, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_csr_i32(m, SIZE_MAX, 2, rp_ok, ci_big, 2, &xo), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i32(m, SIZE_MAX - 1, 2, rp_ok, ci_big, 2, &xo), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 2, (size_t)1 << 40, rp_ok, ci_big, 2, &xo), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_matrix_embed_file(m, "m.unknown", &xo), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_matrix_embed_file(m, "/nonexistent/m.mtx", &xo), DASHRANK_STATUS_IO);
  EXPECT(dashrank_matrix_embed_file(m, "\xff.mtx", &xo), DASHRANK_STATUS_INVALID_UTF8);
  EXPECT(dashrank_matrix_embed_file(m, "tests/data/bad/truncated.csr", &xo), DASHRANK_STATUS_PATTERN);
  CHECK(xo == NULL);

  const char *bad_utf8[] = {"\xc3\x28"};
  EXPECT(dashrank_candidates_prepare(m, "no/such-head", LINES, 1, &co), DASHRANK_STATUS_UNKNOWN_HEAD);
  EXPECT(dashrank_candidates_prepare(m, "\xff", LINES, 1, &co), DASHRANK_STATUS_INVALID_UTF8);
  EXPECT(dashrank_candidates_prepare(m, HEAD, bad_utf8, 1, &co), DASHRANK_STATUS_INVALID_UTF8);
  CHECK(co == NULL);
  /* An invalid line is a per-candidate status, not a failed call. */
  const char *mixed[] = {"garbage", LINES[0], ""};
  EXPECT(dashrank_candidates_prepare(m, HEAD, mixed, 3, &co), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_len(co, &n, NULL), DASHRANK_STATUS_OK);
  CHECK(n == 3);
  EXPECT(dashrank_candidates_status(co, 0, &st), DASHRANK_STATUS_OK);
  CHECK(st == DASHRANK_STATUS_SCHEDULE);
  float s[3];
  EXPECT(dashrank_score(m, x, co, s, 3, NULL), DASHRANK_STATUS_OK);
  CHECK(s[0] != s[0] && s[1] == s[1] && s[2] != s[2]); /* NaN for the invalid ones */
  EXPECT(dashrank_candidates_free(&co), DASHRANK_STATUS_OK);
}

/* --- 5. Whole spaces: NULLs, buffers, indices, bad codes, lifetimes ------------------ */

static bool measure_ok(void *ud, const dashrank_measure_request *r, double *ms) {
  int *calls = ud;
  (*calls)++;
  *ms = 1.0 + (double)(r->index % 7); /* any deterministic time */
  return true;
}

static bool measure_fails(void *ud, const dashrank_measure_request *r, double *ms) {
  (void)ud;
  (void)r;
  *ms = -1.0;
  return false;
}

typedef struct {
  const dashrank_space *space;
  const dashrank_space_candidates *sc;
  size_t index;
  int which; /* 0 name, 1 message, 2 line, 3 render */
} space_text_ctx;

static dashrank_status space_text_fn(const void *p, char *b, size_t l, size_t *n) {
  const space_text_ctx *t = p;
  switch (t->which) {
    case 0: return dashrank_space_name(t->space, b, l, n);
    case 1: return dashrank_space_candidates_message(t->sc, t->index, b, l, n);
    case 2: return dashrank_space_candidates_line(t->sc, t->index, b, l, n);
    default: return dashrank_space_candidates_render(t->sc, t->index, "m", b, l, n);
  }
}

/* Making spaces: NULL out, bad codes, unknown and unsupported names, double free. */
static void spaces_making_misuse(void) {
  dashrank_space *so = (dashrank_space *)1;
  EXPECT(dashrank_space_new(DASHRANK_TARGET_CPU_TACO, DASHRANK_KERNEL_SPMM, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_new(77, DASHRANK_KERNEL_SPMM, 0, &so), DASHRANK_STATUS_INVALID_ARGUMENT);
  CHECK(so == NULL);
  so = (dashrank_space *)1;
  EXPECT(dashrank_space_new(DASHRANK_TARGET_CPU_TACO, 77, 0, &so), DASHRANK_STATUS_INVALID_ARGUMENT);
  CHECK(so == NULL);
  EXPECT(dashrank_space_new(DASHRANK_TARGET_SPADE, DASHRANK_KERNEL_SPMV, 0, &so), DASHRANK_STATUS_UNSUPPORTED_KERNEL);
  EXPECT(dashrank_space_new(DASHRANK_TARGET_GPU_SPARSETIR, DASHRANK_KERNEL_SPMV, 0, &so), DASHRANK_STATUS_UNSUPPORTED_KERNEL);
  EXPECT(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, 2, 2, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_new_taco(77, 2, 2, &so), DASHRANK_STATUS_INVALID_ARGUMENT);
  CHECK(so == NULL);
  EXPECT(dashrank_space_from_name(NULL, 0, &so), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_from_name("taco-spmm", 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_from_name("no-such-space", 0, &so), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_space_from_name("spade-spmv", 0, &so), DASHRANK_STATUS_UNSUPPORTED_KERNEL);
  EXPECT(dashrank_space_from_name("\xff", 0, &so), DASHRANK_STATUS_INVALID_UTF8);
  CHECK(so == NULL);
  EXPECT(dashrank_space_from_name("spade-spmm", 0, &so), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_free(&so), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_free(&so), DASHRANK_STATUS_OK); /* same slot again: no-op */
  EXPECT(dashrank_space_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

/* The space's name (NULLs, optional size) and the matrix's shape. */
static void spaces_name_and_shape_misuse(const dashrank_space *s, const dashrank_matrix *x) {
  size_t need = 0, rows = 0, cols = 0, nnz = 0;
  char buf[512];
  EXPECT(dashrank_space_name(NULL, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_name(s, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_name(s, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);

  /* Matrix shape. */
  EXPECT(dashrank_matrix_shape(NULL, &rows, &cols, &nnz), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_matrix_shape(x, &rows, &cols, &nnz), DASHRANK_STATUS_OK);
  CHECK(rows == 32 && cols == 32 && nnz > 0);
}

/* Preparing: NULLs (head may be NULL), unknown head, a head of another target. */
static void spaces_prepare_misuse(dashrank_model *m, dashrank_matrix *x, const dashrank_space *s) {
  dashrank_space_candidates *sco = (dashrank_space_candidates *)1;
  EXPECT(dashrank_space_prepare(NULL, NULL, s, x, &sco), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(sco == NULL);
  EXPECT(dashrank_space_prepare(m, NULL, NULL, x, &sco), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_prepare(m, NULL, s, NULL, &sco), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_prepare(m, NULL, s, x, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_prepare(m, "no/such-head", s, x, &sco), DASHRANK_STATUS_UNKNOWN_HEAD);
  EXPECT(dashrank_space_prepare(m, "\xff", s, x, &sco), DASHRANK_STATUS_INVALID_UTF8);
  CHECK(sco == NULL);
  dashrank_space *spade = NULL;
  EXPECT(dashrank_space_from_name("spade-spmm", 0, &spade), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_prepare(m, NULL, spade, x, &sco), DASHRANK_STATUS_INVALID_ARGUMENT); /* no SPADE head */
  EXPECT(dashrank_space_prepare(m, HEAD, spade, x, &sco), DASHRANK_STATUS_INVALID_ARGUMENT);  /* head of another target */
  CHECK(sco == NULL);
  EXPECT(dashrank_space_free(&spade), DASHRANK_STATUS_OK);
}

/* Queries: NULLs, optional outputs, indices out of range. Returns the default's index. */
static size_t spaces_candidate_misuse(const dashrank_space_candidates *sc) {
  dashrank_candidate_info info;
  size_t n = 0, ranked = 0, def = 0, need = 0;
  char buf[512];
  EXPECT(dashrank_space_candidates_len(NULL, &n, &ranked), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_len(sc, NULL, &ranked), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_len(sc, &n, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_len(sc, &n, &ranked), DASHRANK_STATUS_OK);
  CHECK(n > 0 && ranked > 0 && ranked <= n);
  EXPECT(dashrank_space_candidates_default(NULL, &def), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_default(sc, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_default(sc, &def), DASHRANK_STATUS_OK);
  CHECK(def < n);
  EXPECT(dashrank_space_candidates_info(NULL, 0, &info), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_info(sc, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_info(sc, n, &info), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_space_candidates_info(sc, SIZE_MAX, &info), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_space_candidates_info(sc, def, &info), DASHRANK_STATUS_OK);
  CHECK(info.is_default);
  EXPECT(dashrank_space_candidates_message(NULL, 0, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_message(sc, 0, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_message(sc, n, buf, sizeof buf, &need), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_space_candidates_line(NULL, 0, buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_line(sc, 0, NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_line(sc, n, buf, sizeof buf, &need), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_space_candidates_line(sc, SIZE_MAX, buf, sizeof buf, NULL), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_space_candidates_render(NULL, 0, "m", buf, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_render(sc, 0, "m", NULL, sizeof buf, &need), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_candidates_render(sc, 0, NULL, buf, sizeof buf, NULL), DASHRANK_STATUS_OK); /* name optional */
  EXPECT(dashrank_space_candidates_render(sc, 0, "\xff", buf, sizeof buf, NULL), DASHRANK_STATUS_INVALID_UTF8);
  EXPECT(dashrank_space_candidates_render(sc, n, "m", buf, sizeof buf, NULL), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  return def;
}

/* Every text export at every length. */
static void spaces_text_misuse(const dashrank_space_candidates *sc, size_t def) {
  dashrank_space *named = NULL;
  EXPECT(dashrank_space_from_name("taco-spmm", 0, &named), DASHRANK_STATUS_OK);
  space_text_ctx t = {named, sc, def, 0};
  text_lengths("space_name", space_text_fn, &t);
  t.which = 1;
  text_lengths("space_candidates_message", space_text_fn, &t);
  t.which = 2;
  text_lengths("space_candidates_line", space_text_fn, &t);
  t.which = 3;
  text_lengths("space_candidates_render", space_text_fn, &t);
  EXPECT(dashrank_space_free(&named), DASHRANK_STATUS_OK);
}

/* Top-k: NULLs, a short `out` writes nothing and reports the count. */
static void spaces_top_k_misuse(dashrank_model *m, dashrank_matrix *x, const dashrank_space_candidates *sc) {
  dashrank_ranked top[8];
  size_t n = 0;
  EXPECT(dashrank_space_top_k(NULL, x, sc, 3, top, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_top_k(m, NULL, sc, 3, top, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_top_k(m, x, NULL, 3, top, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_top_k(m, x, sc, 3, NULL, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_top_k(m, x, sc, 3, top, 8, NULL), DASHRANK_STATUS_OK);
  size_t want = 0;
  EXPECT(dashrank_space_top_k(m, x, sc, 3, top, 8, &want), DASHRANK_STATUS_OK);
  CHECK(want >= 3 && want <= 4);
  for (size_t len = 0; len < want; len++) {
    for (size_t i = 0; i < 8; i++) top[i].index = 0xDEAD;
    EXPECT(dashrank_space_top_k(m, x, sc, 3, len ? top : NULL, len, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
    CHECK(n == want);
    for (size_t i = 0; i < 8; i++) CHECK(top[i].index == 0xDEAD);
  }
}

/* Tuning: NULLs (name, measurements and out_n optional), capacity checked before any
 * measurement, every measurement failing is not a crash. */
static void spaces_tune_misuse(dashrank_model *m, dashrank_matrix *x, const dashrank_space_candidates *sc) {
  dashrank_tune_result res;
  dashrank_measurement meas[8];
  size_t n = 0;
  int calls = 0;
  EXPECT(dashrank_space_tune(NULL, x, sc, 2, "m", measure_ok, &calls, &res, meas, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_tune(m, NULL, sc, 2, "m", measure_ok, &calls, &res, meas, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_tune(m, x, NULL, 2, "m", measure_ok, &calls, &res, meas, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_tune(m, x, sc, 2, "m", NULL, &calls, &res, meas, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_space_tune(m, x, sc, 2, "m", measure_ok, &calls, NULL, meas, 8, &n), DASHRANK_STATUS_NULL_ARGUMENT);
  CHECK(calls == 0);
  EXPECT(dashrank_space_tune(m, x, sc, 2, "m", measure_ok, &calls, &res, meas, 2, &n), DASHRANK_STATUS_INSUFFICIENT_SIZE);
  CHECK(calls == 0 && n == 3);
  EXPECT(dashrank_space_tune(m, x, sc, 2, NULL, measure_ok, &calls, &res, NULL, 0, NULL), DASHRANK_STATUS_OK);
  CHECK(calls >= 2 && calls <= 3);
  calls = 0;
  EXPECT(dashrank_space_tune(m, x, sc, 2, "m", measure_ok, &calls, &res, meas, 8, &n), DASHRANK_STATUS_OK);
  CHECK(calls == (int)n && n >= 2 && n <= 3);
  dashrank_status st = dashrank_space_tune(m, x, sc, 2, "m", measure_fails, NULL, &res, meas, 8, &n);
  checks++;
  if (st == DASHRANK_STATUS_PANIC) FAIL("tuning with failing measurements panicked");
}

/* A matrix embedded by another model is refused. */
static void spaces_foreign_matrix_misuse(dashrank_model *m, const dashrank_space_candidates *sc,
                                         const char *other_dir) {
  dashrank_ranked top[8];
  size_t n = 0;
  dashrank_model *other = load(other_dir);
  int32_t rp[33], ci[200];
  int k = band(32, 0, rp, ci);
  dashrank_matrix *y = NULL;
  EXPECT(dashrank_matrix_embed_csr_i32(other, 32, 32, rp, ci, (size_t)k, &y), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_top_k(m, y, sc, 3, top, 8, &n), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_matrix_free(&y), DASHRANK_STATUS_OK);
  EXPECT(dashrank_model_release(&other), DASHRANK_STATUS_OK);
}

static void spaces(dashrank_model *m, dashrank_matrix *x, const char *other_dir) {
  dashrank_space *s = NULL;
  dashrank_space_candidates *sc = NULL;

  spaces_making_misuse();
  EXPECT(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, 2, 2, &s), DASHRANK_STATUS_OK);
  if (!s) return;
  spaces_name_and_shape_misuse(s, x);
  spaces_prepare_misuse(m, x, s);
  EXPECT(dashrank_space_prepare(m, NULL, s, x, &sc), DASHRANK_STATUS_OK);
  if (!sc) return;
  /* Candidates outlive their space. */
  EXPECT(dashrank_space_free(&s), DASHRANK_STATUS_OK);

  size_t def = spaces_candidate_misuse(sc);
  spaces_text_misuse(sc, def);
  spaces_top_k_misuse(m, x, sc);
  spaces_tune_misuse(m, x, sc);
  spaces_foreign_matrix_misuse(m, sc, other_dir);

  EXPECT(dashrank_space_candidates_free(&sc), DASHRANK_STATUS_OK);
  CHECK(sc == NULL);
  EXPECT(dashrank_space_candidates_free(&sc), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

/* --- 5b. TACO programs and repacking ------------------------------------------------ */

/* The options with a stale ABI version, refused everywhere they are taken. */
static dashrank_taco_options taco_stale_options(const dashrank_taco_options *o) {
  dashrank_taco_options stale = *o;
  stale.abi_version = 0;
  return stale;
}

/* Construction: NULLs, unknown kernels, bad lines, empty shapes, stale options. Returns the
 * program of `line` (NULL if it could not be built). */
static dashrank_taco_program *taco_construction_misuse(const char *line, const dashrank_taco_options *o) {
  dashrank_taco_program *p = NULL, *q = NULL;
  EXPECT(dashrank_taco_program_from_line(DASHRANK_KERNEL_SPMM, NULL, 32, 32, o, &p), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_from_line(DASHRANK_KERNEL_SPMM, line, 32, 32, o, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_from_line(9, line, 32, 32, o, &p), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_taco_program_from_line(DASHRANK_KERNEL_SPMM, "3 8 8 i1", 32, 32, o, &p), DASHRANK_STATUS_SCHEDULE);
  EXPECT(dashrank_taco_program_from_line(DASHRANK_KERNEL_SPMM, line, 0, 32, o, &p), DASHRANK_STATUS_INVALID_ARGUMENT);
  CHECK(p == NULL);
  dashrank_taco_options stale = taco_stale_options(o);
  EXPECT(dashrank_taco_program_csr(DASHRANK_KERNEL_SPMM, 32, 32, &stale, &p), DASHRANK_STATUS_ABI_MISMATCH);
  EXPECT(dashrank_taco_program_csr(DASHRANK_KERNEL_SPMM, 32, 32, NULL, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_csr(DASHRANK_KERNEL_SPMM, 32, 32, NULL, &q), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_free(&q), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_from_line(DASHRANK_KERNEL_SPMM, line, 32, 32, o, &p), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_parse(NULL, &q), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_parse("taco nonsense", &q), DASHRANK_STATUS_SCHEDULE);
  EXPECT(dashrank_taco_program_parse("taco \"C(i)=A(i,k)*B(k)\"", NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  return p;
}

/* Text forms (sizes as in every text export), then structure: out-of-range indices. */
static void taco_program_text_and_structure_misuse(const dashrank_taco_program *p) {
  dashrank_taco_program_info info;
  dashrank_taco_tensor_info t;
  dashrank_taco_command_info cmd;
  size_t needed = 0;
  char buf[4096];
  EXPECT(dashrank_taco_program_command_line(NULL, buf, sizeof buf, &needed), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_command_line(p, buf, 4, &needed), DASHRANK_STATUS_INSUFFICIENT_SIZE);
  EXPECT(dashrank_taco_program_command_line(p, buf, sizeof buf, &needed), DASHRANK_STATUS_OK);
  CHECK(strncmp(buf, "taco \"C(", 8) == 0);
  dashrank_taco_program *back = NULL;
  EXPECT(dashrank_taco_program_parse(buf, &back), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_free(&back), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_cpp(NULL, buf, sizeof buf, &needed), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_cpp(p, buf, 0, &needed), DASHRANK_STATUS_INSUFFICIENT_SIZE);
  EXPECT(dashrank_taco_program_cpp(p, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
  /* Structure: out-of-range indices. */
  EXPECT(dashrank_taco_program_summary(NULL, &info), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_summary(p, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_summary(p, &info), DASHRANK_STATUS_OK);
  CHECK(info.kernel == DASHRANK_KERNEL_SPMM && info.tensors == 3 && info.threads == 2 && info.chunk == 16);
  EXPECT(dashrank_taco_program_tensor(p, info.tensors, &t), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_taco_program_tensor(p, 1, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_tensor(NULL, 1, &t), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_tensor(p, 1, &t), DASHRANK_STATUS_OK);
  CHECK(strcmp(t.name, "A") == 0 && t.order == 4);
  EXPECT(dashrank_taco_program_command(p, info.commands, &cmd), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_taco_program_command(NULL, 0, &cmd), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_command(p, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_command(p, info.commands - 1, &cmd), DASHRANK_STATUS_OK);
  CHECK(cmd.kind == DASHRANK_TACO_PARALLELIZE && cmd.n_args == 3);
}

/* Repacking: NULL arrays, a shape other than the program's, malformed CSR, stale options, a
 * layout beyond the limit, int64 arrays. Leaves the limit in `o` at 20. */
static void taco_pack_misuse(const dashrank_taco_program *p, dashrank_taco_options *o,
                             const int32_t *rp, const int32_t *ci, int nnz) {
  dashrank_taco_packed *pk = NULL;
  dashrank_taco_options stale = taco_stale_options(o);
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, NULL, ci, NULL, (size_t)nnz, NULL, &pk), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, rp, ci, NULL, (size_t)nnz, NULL, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_pack_csr_i32(NULL, 32, 32, rp, ci, NULL, (size_t)nnz, NULL, &pk), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_pack_csr_i32(p, 16, 32, rp, ci, NULL, (size_t)rp[16], NULL, &pk), DASHRANK_STATUS_INVALID_ARGUMENT);
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, rp, ci, NULL, (size_t)nnz - 1, NULL, &pk), DASHRANK_STATUS_PATTERN);
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, rp, ci, NULL, (size_t)nnz, &stale, &pk), DASHRANK_STATUS_ABI_MISMATCH);
  CHECK(pk == NULL);
  /* A layout of stored zeros beyond the limit: a dense column level under compressed rows. */
  o->max_positions_per_nonzero = 1;
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, rp, ci, NULL, (size_t)nnz, o, &pk), DASHRANK_STATUS_LAYOUT_TOO_LARGE);
  o->max_positions_per_nonzero = 20;
  int64_t rp64[33], ci64[200];
  for (int r = 0; r <= 32; r++) rp64[r] = rp[r];
  for (int n = 0; n < nnz; n++) ci64[n] = ci[n];
  EXPECT(dashrank_taco_pack_csr_i64(p, 32, 32, rp64, ci64, NULL, (size_t)nnz, o, &pk), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_packed_free(&pk), DASHRANK_STATUS_OK);
}

/* A packed matrix with values: levels and values (NULLs, out-of-range indices), every value
 * landing once, double free. */
static void taco_packed_misuse(const dashrank_taco_program *p, const dashrank_taco_options *o,
                               const int32_t *rp, const int32_t *ci, int nnz) {
  dashrank_taco_packed *pk = NULL;
  dashrank_taco_level lv;
  const float *vals = NULL;
  size_t len = 0, levels = 0;
  float v[200];
  for (int n = 0; n < nnz; n++) v[n] = (float)n;
  EXPECT(dashrank_taco_pack_csr_i32(p, 32, 32, rp, ci, v, (size_t)nnz, o, &pk), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_packed_levels(pk, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_levels(NULL, &levels), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_levels(pk, &levels), DASHRANK_STATUS_OK);
  CHECK(levels == 4);
  EXPECT(dashrank_taco_packed_level(pk, levels, &lv), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_taco_packed_level(NULL, 0, &lv), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_level(pk, 0, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_level(pk, 1, &lv), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_packed_values(pk, NULL, &len), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_values(pk, &vals, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_values(NULL, &vals, &len), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_packed_values(pk, &vals, &len), DASHRANK_STATUS_OK);
  double sum = 0;
  for (size_t i = 0; i < len; i++) sum += vals[i];
  CHECK(sum == (double)nnz * (nnz - 1) / 2); /* every value lands once, zeros elsewhere */
  EXPECT(dashrank_taco_packed_free(&pk), DASHRANK_STATUS_OK);
  CHECK(pk == NULL);
  EXPECT(dashrank_taco_packed_free(&pk), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_packed_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

/* From a prepared space: the default is TACO's CSR; other toolchains are refused. */
static void taco_from_candidate_misuse(dashrank_model *m, dashrank_matrix *x,
                                       const dashrank_taco_options *o) {
  dashrank_taco_program *q = NULL;
  char buf[4096];
  dashrank_space *s = NULL;
  dashrank_space_candidates *sc = NULL;
  size_t d = 0, n = 0;
  EXPECT(dashrank_space_new_taco(DASHRANK_KERNEL_SPMM, 4, 4, &s), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_prepare(m, NULL, s, x, &sc), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_default(sc, &d), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_len(sc, &n, NULL), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_from_candidate(NULL, d, o, &q), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_from_candidate(sc, n, o, &q), DASHRANK_STATUS_INDEX_OUT_OF_RANGE);
  EXPECT(dashrank_taco_program_from_candidate(sc, d, o, NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_program_from_candidate(sc, d, o, &q), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_command_line(q, buf, sizeof buf, NULL), DASHRANK_STATUS_OK);
  CHECK(strstr(buf, "-f=A:ds ") != NULL && strstr(buf, "bound(") == NULL);
  EXPECT(dashrank_taco_program_free(&q), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_candidates_free(&sc), DASHRANK_STATUS_OK);
  EXPECT(dashrank_space_free(&s), DASHRANK_STATUS_OK);
}

static void taco_programs(dashrank_model *m, dashrank_matrix *x) {
  dashrank_taco_options o;
  int32_t rp[33], ci[200];
  int nnz = band(32, 0, rp, ci);
  const char *line = "4 8 8 i1 k1 i0 k0 j1 j0 0 1 0 1 i1 48 16"; /* dense levels under compressed */

  EXPECT(dashrank_taco_options_init(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
  EXPECT(dashrank_taco_options_init(&o), DASHRANK_STATUS_OK);
  o.threads = 2;
  dashrank_taco_program *p = taco_construction_misuse(line, &o);
  taco_program_text_and_structure_misuse(p);
  taco_pack_misuse(p, &o, rp, ci, nnz);
  taco_packed_misuse(p, &o, rp, ci, nnz);
  taco_from_candidate_misuse(m, x, &o);
  EXPECT(dashrank_taco_program_free(&p), DASHRANK_STATUS_OK);
  CHECK(p == NULL);
  EXPECT(dashrank_taco_program_free(&p), DASHRANK_STATUS_OK);
  EXPECT(dashrank_taco_program_free(NULL), DASHRANK_STATUS_NULL_ARGUMENT);
}

/* --- 6. 8 threads x 1000 calls sharing one model, bit for bit ------------------------- */

#define NPAT 6
static const int SIZES[NPAT] = {8, 40, 150, 400, 900, 1600};

typedef struct {
  float scores[NPAT][NLINES];
  uint32_t top[NPAT][2];
  char name[64];
} reference_t;

typedef struct {
  const dashrank_model *m;
  const dashrank_candidates *c;
  const reference_t *ref;
  int thread, calls, made, mismatches, errors;
} worker_t;

static int32_t *pat_rp[NPAT], *pat_ci[NPAT];
static int pat_nnz[NPAT];

/* One round: embed pattern p, then score / top-k / queries on it; counts its calls. */
static void round_trip(worker_t *w, int p, reference_t *out) {
  dashrank_matrix *x = NULL;
  float s[NLINES];
  uint32_t idx[2];
  size_t n = 0;
  char name[64];
  w->made++;
  if (dashrank_matrix_embed_csr_i32(w->m, (size_t)SIZES[p], (size_t)SIZES[p], pat_rp[p], pat_ci[p],
                                    (size_t)pat_nnz[p], &x) != DASHRANK_STATUS_OK) {
    w->errors++;
    return;
  }
  w->made += 4;
  if (dashrank_score(w->m, x, w->c, s, NLINES, NULL) != DASHRANK_STATUS_OK ||
      dashrank_top_k(w->m, x, w->c, 2, idx, NULL, 2, &n) != DASHRANK_STATUS_OK || n != 2 ||
      dashrank_model_head_name(w->m, 0, name, sizeof name, NULL) != DASHRANK_STATUS_OK)
    w->errors++;
  dashrank_matrix_free(&x);
  if (out) {
    memcpy(out->scores[p], s, sizeof s);
    memcpy(out->top[p], idx, sizeof idx);
    memcpy(out->name, name, sizeof name);
  } else if (memcmp(w->ref->scores[p], s, sizeof s) != 0 || memcmp(w->ref->top[p], idx, sizeof idx) != 0 ||
             strcmp(w->ref->name, name) != 0) {
    w->mismatches++;
  }
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  for (int i = 0; w->made < w->calls; i++) round_trip(w, (i * 5 + w->thread) % NPAT, NULL);
  return NULL;
}

static void threads(dashrank_model *m, dashrank_candidates *c, int nthreads, int calls) {
  for (int p = 0; p < NPAT; p++) {
    pat_rp[p] = malloc(sizeof(int32_t) * (size_t)(SIZES[p] + 1));
    pat_ci[p] = malloc(sizeof(int32_t) * (size_t)SIZES[p] * 6);
    pat_nnz[p] = band(SIZES[p], p, pat_rp[p], pat_ci[p]);
  }
  static reference_t ref;
  worker_t single = {m, c, &ref, 0, 0, 0, 0, 0};
  for (int p = 0; p < NPAT; p++) round_trip(&single, p, &ref);
  CHECK(single.errors == 0);

  worker_t w[16];
  pthread_t tid[16];
  for (int t = 0; t < nthreads; t++) {
    w[t] = (worker_t){dashrank_model_retain(m), c, &ref, t, calls, 0, 0, 0};
    pthread_create(&tid[t], NULL, worker_main, &w[t]);
  }
  int total = 0, mismatches = 0, errors = 0;
  for (int t = 0; t < nthreads; t++) {
    pthread_join(tid[t], NULL);
    dashrank_model *mine = (dashrank_model *)w[t].m;
    dashrank_model_release(&mine);
    total += w[t].made;
    mismatches += w[t].mismatches;
    errors += w[t].errors;
  }
  checks += total;
  if (mismatches || errors) FAIL("threads: %d mismatches, %d errors in %d calls", mismatches, errors, total);
  printf("threads: %d threads x %d calls (%d in all) over %d matrices (%d..%d rows): %s\n",
         nthreads, calls, total, NPAT, SIZES[0], SIZES[NPAT - 1],
         mismatches || errors ? "DIFFER" : "bit-identical to one thread");
  for (int p = 0; p < NPAT; p++) {
    free(pat_rp[p]);
    free(pat_ci[p]);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR OTHER_MODEL_DIR [THREADS] [CALLS_PER_THREAD]\n", argv[0]);
    return 2;
  }
  int nthreads = argc > 3 ? atoi(argv[3]) : 8;
  int calls = argc > 4 ? atoi(argv[4]) : 1000;
  if (nthreads < 1 || nthreads > 16) nthreads = 8;
  if (calls < 1) calls = 1000;

  dashrank_model *m = load(argv[1]);
  dashrank_candidates *c = NULL, *bad = NULL;
  dashrank_matrix *x = NULL;
  const char *bad_lines[] = {"3 8 8 i1 k1 i0 k0 j1 j0 1 0 0 0 i1 48 16"};
  int32_t rp[33], ci[200];
  int nnz = band(32, 0, rp, ci);
  EXPECT(dashrank_candidates_prepare(m, HEAD, LINES, NLINES, &c), DASHRANK_STATUS_OK);
  EXPECT(dashrank_candidates_prepare(m, HEAD, bad_lines, 1, &bad), DASHRANK_STATUS_OK);
  EXPECT(dashrank_matrix_embed_csr_i32(m, 32, 32, rp, ci, (size_t)nnz, &x), DASHRANK_STATUS_OK);
  if (!c || !bad || !x) return 1;

  null_arguments(m, x, c, argv[1]);
  buffers(m, x, c, bad);
  lifetimes(argv[1], argv[2], c);
  bad_values(m, x, c, argv[1]);
  spaces(m, x, argv[2]);
  taco_programs(m, x);
  threads(m, c, nthreads, calls);

  dashrank_matrix_free(&x);
  dashrank_candidates_free(&c);
  dashrank_candidates_free(&bad);
  dashrank_model_release(&m);
  printf("misuse: %s (%d checks, %d failures)\n", failures ? "FAILED" : "ok", checks, failures);
  return failures ? 1 : 0;
}
