#pragma once
// Inputs of the emulated kernel tests: uniform in [-1, 1), each exactly an f32, as float64 (the
// reference's type), so the kernel's f32 copy and the reference see the same numbers.
#include <cstddef>
#include <random>
#include <vector>

inline std::vector<double> kvt_emulated_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& e : v) e = static_cast<float>(u(rng));
  return v;
}
