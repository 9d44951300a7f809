#pragma once
// The machine code of one kernel in a cubin, for the bench programs that compare two trees' kernel
// templates without a GPU (ptx_digest --sass, variant_time --machine-code): equal bytes are the
// same machine code, so no GPU A/B is needed.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvtune/error.h"

namespace kvtune::bench {

// The bytes of the ELF64 section named `name` of a cubin (the machine code of kernel K is ".text.K").
inline std::string_view elf_section(std::string_view elf, const std::string& name) {
  const auto read = [&](std::size_t at, int bytes) {
    if (at + std::size_t(bytes) > elf.size()) throw Error("truncated cubin");
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(elf[at + std::size_t(i)]);
    return std::size_t(v);
  };
  if (elf.substr(0, 4) != "\x7f" "ELF" || elf.size() < 64 || elf[4] != 2) throw Error("not an ELF64 cubin");
  const std::size_t shoff = read(0x28, 8), shentsize = read(0x3A, 2), shnum = read(0x3C, 2), shstrndx = read(0x3E, 2);
  const std::size_t strings = read(shoff + shstrndx * shentsize + 0x18, 8);
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t header = shoff + i * shentsize;
    const std::size_t at = strings + read(header, 4);
    if (elf.compare(at, name.size() + 1, std::string_view(name.c_str(), name.size() + 1)) == 0)
      return elf.substr(read(header + 0x18, 8), read(header + 0x20, 8));
  }
  throw Error("no section " + name + " in the cubin");
}

// The machine code (.text section) of the kernel whose lowered name is `lowered`.
inline std::string_view kernel_text(std::string_view cubin, const std::string& lowered) {
  return elf_section(cubin, ".text." + lowered);
}

}  // namespace kvtune::bench
