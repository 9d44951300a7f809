# Turns a text file into a C++ source defining `std::string_view NAME` with its contents.
# Usage: cmake -DINPUT=file -DOUTPUT=file.cpp -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" content)
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n"
  "namespace kvtune::embedded {\nextern const std::string_view ${NAME};\n"
  "const std::string_view ${NAME} = R\"kvtune_embed(${content})kvtune_embed\";\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
