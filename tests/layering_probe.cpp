// The layering test (tests/CMakeLists.txt, "layering"): compiled with one library layer's include
// directories, it fails unless PROBE_HEADER is visible exactly when PROBE_VISIBLE says so. The
// layers and what each may see: CMakeLists.txt, kvtune_layer.
#if __has_include(PROBE_HEADER) != PROBE_VISIBLE
#error "the layer's view of PROBE_HEADER is not what the layering says"
#endif
int main() { return 0; }
