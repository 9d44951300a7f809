// Uses only the installed public header: no CUDA headers are needed to call kvtune.
#include <kvtune/kvtune.h>

#include <cstdio>

int main() {
  kvtune::NormalizeArgs args;  // null pointers: rejected before any GPU work
  args.rows = 8;
  args.cols = 8;
  try {
    kvtune::tuned_normalize(args);
  } catch (const kvtune::Error& e) {
    std::printf("kvtune %s: %s\n", kvtune::version(), e.what());
    return e.context().field == "x" ? 0 : 1;
  }
  return 1;
}
