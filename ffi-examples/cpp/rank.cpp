// Ranks the measured SuperSchedules of a real matrix with a real model through the C++
// wrapper and prints the top k beside their measured TACO runtimes.
//
//   rank MODEL_DIR MATRIX.csr|MATRIX.mtx CANDIDATES.txt [K]
//
// CANDIDATES.txt holds one WACO SuperSchedule per line, optionally with "= <ms>" (e.g.
// ../shared/data/waco/collected/SpMM/<matrix>.txt).
#include <dashrank.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR MATRIX CANDIDATES.txt [K]\n", argv[0]);
    return 2;
  }
  size_t k = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 10;
  try {
    std::printf("dashrank %s\n", dashrank::version().c_str());
    dashrank::Model model(argv[1]);
    std::string head = model.head_name(0);
    std::printf("model %s, head %s\n", model.describe().c_str(), head.c_str());

    std::vector<std::string> lines;
    std::ifstream in(argv[3]);
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) lines.push_back(l);
    if (lines.empty()) throw dashrank::Error(DASHRANK_STATUS_INVALID_ARGUMENT, "no candidates");

    dashrank::Candidates cands = model.prepare(head, lines);
    dashrank::Matrix matrix = model.embed_file(argv[2]);
    std::printf("%zu candidates (%zu valid) for %s\n", cands.size(), cands.valid_count(), argv[2]);

    auto best = model.top_k(matrix, cands, k);
    std::vector<double> measured;
    for (const auto &l : lines) {
      auto eq = l.find('=');
      measured.push_back(eq == std::string::npos ? NAN : std::atof(l.c_str() + eq + 1));
    }
    double best_ms = *std::min_element(measured.begin(), measured.end());
    for (size_t r = 0; r < best.size(); r++) {
      std::string text = lines[best[r].index].substr(0, lines[best[r].index].find('='));
      std::printf("#%-2zu score %9.4f  measured %9.3f ms  %s\n", r + 1, best[r].score,
                  measured[best[r].index], text.c_str());
    }
    if (!std::isnan(best_ms)) std::printf("best measured: %.3f ms\n", best_ms);

    // Copies share the model; scoring from two threads at once is allowed.
    dashrank::Model shared = model;
    std::vector<float> a, b;
    std::thread t([&] { a = shared.score(matrix, cands); });
    b = model.score(matrix, cands);
    t.join();
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); i++)
      same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
    std::printf("two threads, one model: %s\n", same ? "identical scores" : "DIFFERENT");

    // Errors are exceptions carrying the status.
    try {
      model.prepare("no/such-head", lines);
    } catch (const dashrank::Error &e) {
      std::printf("expected error: status %u (%s): %s\n", unsigned(e.status()),
                  dashrank::status_message(e.status()).c_str(), e.what());
    }
    return same ? 0 : 1;
  } catch (const dashrank::Error &e) {
    std::fprintf(stderr, "error: status %u: %s\n", unsigned(e.status()), e.what());
    return 1;
  }
}
