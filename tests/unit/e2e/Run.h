// Runs the shardproof binary and captures its output and exit code.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace shardproof::testing {

struct RunResult {
  int exitCode = -1;
  std::string out; // stdout and stderr together
};

inline RunResult runShardproof(const std::string &args) {
  std::string cmd = std::string(SHARDPROOF_BINARY) + " " + args + " 2>&1";
  RunResult r;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string example(const std::string &name) {
  return std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples/" + name;
}

} // namespace shardproof::testing
