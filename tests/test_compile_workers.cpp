// Compiles in worker processes (core/compile_workers.h): the same cubin as in this process, the
// same errors, and a request that still compiles whatever the worker does (dies, answers garbage,
// cannot start), in a forked child too. CPU only: NVRTC needs no GPU.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/compile_workers.h"
#include "kvtune/error.h"

using namespace kvtune;
using namespace kvtune::detail;

namespace {

constexpr const char* kSource = R"(
template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= float(N); }
)";

CompileRequest request_for(int n, const char* source = kSource) {
  CompileRequest r;
  r.program_name = "scale.cu";
  r.source = source;
  r.name_expressions = {"scale<" + std::to_string(n) + ">"};
  r.arch = "sm_90";
  return r;
}

std::string worker() {
  const std::string w = find_compile_worker();
  REQUIRE_FALSE(w.empty());  // built beside the tests' folder (tests/CMakeLists.txt)
  return w;
}

}  // namespace

TEST_CASE("compile workers: the worker beside the build compiles what this process compiles, byte for byte",
          "[compile_workers]") {
  const std::string w = worker();
  const auto before = compile_worker_stats(w);
  const auto local = nvrtc_compile(request_for(3));
  const auto remote = compile_in_worker(w, request_for(3));
  CHECK(remote.cubin == local.cubin);
  CHECK(remote.lowered_names == local.lowered_names);
  CHECK(remote.seconds > 0);
  const auto after = compile_worker_stats(w);
  CHECK(after.compiled == before.compiled + 1);
  CHECK(after.fell_back == before.fell_back);
  CHECK(after.alive >= 1);
  // "" compiles in this process
  CHECK(compile_in_worker("", request_for(4)).cubin == nvrtc_compile(request_for(4)).cubin);
}

TEST_CASE("compile workers: a compile error comes back as the same CompileError", "[compile_workers]") {
  const std::string w = worker();
  const char* broken = "template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= undeclared; }";
  std::string local_what, local_log;
  try {
    nvrtc_compile(request_for(2, broken));
    FAIL("no error");
  } catch (const CompileError& e) {
    local_what = e.what();
    local_log = e.log();
  }
  const auto before = compile_worker_stats(w);
  try {
    compile_in_worker(w, request_for(2, broken));
    FAIL("no error");
  } catch (const CompileError& e) {
    CHECK(std::string(e.what()) == local_what);
    CHECK(e.log() == local_log);
    CHECK(e.log().find("undeclared") != std::string::npos);
    CHECK(e.name_expressions() == std::vector<std::string>{"scale<2>"});
    CHECK(e.context().op == "nvrtc");
  }
  // The worker stays in the pool: an error is an answer, not a failure.
  CHECK(compile_worker_stats(w).fell_back == before.fell_back);
}

TEST_CASE("compile workers: threads share the pool and every result is right", "[compile_workers]") {
  const std::string w = worker();
  std::vector<std::string> expected;
  for (int n = 1; n <= 6; ++n) expected.push_back(nvrtc_compile(request_for(n)).cubin);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int n = 1 + t; n <= 6; n += 3)
        if (compile_in_worker(w, request_for(n)).cubin != expected[std::size_t(n - 1)]) ++wrong;
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(compile_worker_stats(w).alive <= int(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_CASE("compile workers: a worker that dies is replaced, and the request still compiles", "[compile_workers]") {
  const std::string w = worker();
  compile_in_worker(w, request_for(5));
  const auto idle = compile_worker_stats(w).idle_pids;
  REQUIRE_FALSE(idle.empty());
  for (int pid : idle) ::kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // dead by now (reaped by the pool)
  const auto before = compile_worker_stats(w);
  const auto local = nvrtc_compile(request_for(5));
  for (int i = 0; i < 3; ++i) CHECK(compile_in_worker(w, request_for(5)).cubin == local.cubin);
  const auto after = compile_worker_stats(w);
  CHECK(after.compiled == before.compiled + 3);  // dead idle workers are seen and replaced
  CHECK(after.fell_back == before.fell_back);
  CHECK(after.started > before.started);
  for (int pid : idle) CHECK(::kill(pid, 0) != 0);  // reaped, no zombie left
}

TEST_CASE("compile workers: a worker that cannot serve (exits, echoes) is given up on, compiles go on here",
          "[compile_workers]") {
  // One exits at once; one echoes the request back (not an answer).
  char folder[] = "/tmp/kvtune-impostor-XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  const std::string echo = std::string(folder) + "/echo";
  {
    std::FILE* f = std::fopen(echo.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("#!/bin/sh\nexec cat >&0\n", f);  // back on the socket
    std::fclose(f);
    ::chmod(echo.c_str(), 0755);
  }
  for (const std::string& impostor : {std::string("/bin/true"), echo}) {
    INFO(impostor);
    const auto local = nvrtc_compile(request_for(7));
    for (int i = 0; i < 5; ++i) CHECK(compile_in_worker(impostor, request_for(7)).cubin == local.cubin);
    const auto s = compile_worker_stats(impostor);
    CHECK(s.compiled == 0);
    CHECK(s.fell_back == 5);
    CHECK(s.started == 3);  // three failures in a row, then no more starts
    CHECK(s.alive == 0);
  }
  ::unlink(echo.c_str());
  ::rmdir(folder);
}

TEST_CASE("compile workers: idle workers exit, and a forked child compiles in itself", "[compile_workers]") {
  const std::string w = worker();
  set_compile_worker_idle_seconds(0.2);
  compile_in_worker(w, request_for(8));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (compile_worker_stats(w).alive > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(compile_worker_stats(w).alive == 0);
  set_compile_worker_idle_seconds(kIdleSeconds);

  compile_in_worker(w, request_for(9));  // a worker is alive again
  const std::string expected = nvrtc_compile(request_for(9)).cubin;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    const bool ok = compile_in_worker(w, request_for(9)).cubin == expected && compile_worker_stats(w).started == 0;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(compile_in_worker(w, request_for(9)).cubin == expected);  // the parent's pool is untouched
}
