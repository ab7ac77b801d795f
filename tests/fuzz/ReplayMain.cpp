// A main() for the fuzz targets when they are not linked with libFuzzer: runs
// LLVMFuzzerTestOneInput once on every file named (directories: every regular
// file in them, in name order). ctest uses it to replay tests/fuzz/regressions
// in the normal and the sanitizer builds. A crash or a finding aborts; a path
// that does not exist is an error, so a renamed directory cannot silently pass.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

static bool replay(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
  static uint8_t none = 0; // libFuzzer never passes a null pointer, even for no bytes
  LLVMFuzzerTestOneInput(bytes.empty() ? &none : bytes.data(), bytes.size());
  return true;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  size_t count = 0;
  for (int a = 1; a < argc; ++a) {
    fs::path p(argv[a]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> files;
      for (auto &e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
          files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (auto &f : files) {
        if (!replay(f))
          return 2;
        ++count;
      }
    } else if (fs::is_regular_file(p, ec)) {
      if (!replay(p))
        return 2;
      ++count;
    } else {
      std::fprintf(stderr, "replay: %s does not exist\n", argv[a]);
      return 2;
    }
  }
  std::fprintf(stderr, "replay: %zu inputs, no finding\n", count);
  return 0;
}
