// Ranks the candidate schedules of a file for one matrix with the C API and prints the top k
// in the form of ../cpp/rank.cpp, so that the C, static and C++ builds can be compared.
//
//   rank_c MODEL_DIR MATRIX.csr|MATRIX.mtx CANDIDATES.txt [K]
#include <dashrank.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINES 4096
#define MAX_LINE 512

static int fail(dashrank_status status, const char *what) {
  char msg[512];
  dashrank_last_error_message(msg, sizeof msg, NULL);
  fprintf(stderr, "error: %s: status %u: %s\n", what, (unsigned)status, msg);
  return 1;
}

// Reads the non-empty lines of `path` into `lines` (at most MAX_LINES); returns their count.
static size_t read_lines(const char *path, char (*lines)[MAX_LINE]) {
  FILE *f = fopen(path, "r");
  size_t n = 0;
  if (!f) return 0;
  while (n < MAX_LINES && fgets(lines[n], MAX_LINE, f)) {
    lines[n][strcspn(lines[n], "\r\n")] = '\0';
    if (lines[n][0] != '\0') n++;
  }
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL_DIR MATRIX CANDIDATES.txt [K]\n", argv[0]);
    return 2;
  }
  if (dashrank_abi_version() != DASHRANK_ABI_VERSION) {
    fprintf(stderr, "error: header ABI %u, library ABI %u\n", DASHRANK_ABI_VERSION, dashrank_abi_version());
    return 1;
  }
  size_t k = argc > 4 ? strtoul(argv[4], NULL, 10) : 10;
  static char lines[MAX_LINES][MAX_LINE];
  size_t n = read_lines(argv[3], lines);
  if (n == 0) {
    fprintf(stderr, "error: no candidate lines in %s\n", argv[3]);
    return 1;
  }
  const char *ptrs[MAX_LINES];
  for (size_t i = 0; i < n; i++) ptrs[i] = lines[i];

  struct dashrank_model *model = NULL;
  struct dashrank_matrix *matrix = NULL;
  struct dashrank_candidates *cands = NULL;
  char head[128];
  uint32_t idx[64];
  float scores[64];
  size_t got = 0;
  dashrank_status s;
  int rc = 1;
  if ((s = dashrank_model_load(argv[1], NULL, &model)) != DASHRANK_STATUS_OK) return fail(s, "loading the model");
  if ((s = dashrank_model_head_name(model, 0, head, sizeof head, NULL)) != DASHRANK_STATUS_OK) {
    fail(s, "head name");
  } else if ((s = dashrank_candidates_prepare(model, head, ptrs, n, &cands)) != DASHRANK_STATUS_OK) {
    fail(s, "preparing the candidates");
  } else if ((s = dashrank_matrix_embed_file(model, argv[2], &matrix)) != DASHRANK_STATUS_OK) {
    fail(s, "embedding the matrix");
  } else if ((s = dashrank_top_k(model, matrix, cands, k < 64 ? k : 64, idx, scores, 64, &got)) != DASHRANK_STATUS_OK) {
    fail(s, "top k");
  } else {
    printf("dashrank %s, head %s, %zu candidates\n", dashrank_version(), head, n);
    for (size_t r = 0; r < got; r++) {
      const char *line = lines[idx[r]];
      const char *eq = strchr(line, '=');
      double ms = eq ? atof(eq + 1) : NAN;
      int len = eq ? (int)(eq - line) : (int)strlen(line);
      printf("#%-2zu score %9.4f  measured %9.3f ms  %.*s\n", r + 1, scores[r], ms, len, line);
    }
    rc = 0;
  }
  dashrank_candidates_free(&cands);
  dashrank_matrix_free(&matrix);
  dashrank_model_release(&model);
  return rc;
}
