// kvtune-compile-worker: the helper process a tuning run compiles kernels in (core/compile_workers.h).
// Started by the library with --serve; it answers compile requests on its standard input (a socket)
// until end-of-file. Not a user command.

#include <cstdio>
#include <cstring>

#include "core/compile_workers.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--serve") == 0) return kvtune::detail::compile_worker_main(0);
  std::fprintf(stderr,
               "kvtune-compile-worker: the helper process kvtune's tuning compiles kernels in; the library starts "
               "it (--serve). Not for direct use.\n");
  return 2;
}
