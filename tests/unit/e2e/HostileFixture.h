// The fixture of the hostile-input tests (HostileInputTest.cpp,
// TrustTest.cpp): tiny ONNX models built in a temporary directory, broken in
// one way each, and the spec that checks them.
#pragma once

#include "Run.h"
#include "ScratchDir.h"

#include "tests/unit/OnnxBuilder.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shardproof::testing::hostile {

namespace fs = std::filesystem;
using Model = shardproof::testing::OnnxBuilder;

// y = Relu(x), x of size n: the reference and, unchanged, every rank.
inline Model relu() {
  Model m;
  m.input("x", {"n"}).output("y", {"n"});
  m.node("/act/Relu", "Relu", {"x"}, {"y"});
  return m;
}

class Hostile : public ScratchDir {
protected:
  Hostile() : ScratchDir("hostile") {}
  void save(const std::string &name, const Model &m) { write(name, m.m.SerializeAsString()); }
  // Reference and both ranks: y = Relu(x); `rank1` replaces rank 1's model.
  void models(const Model &rank0 = relu(), const Model &rank1 = relu(), const Model &ref = relu()) {
    save("ref.onnx", ref);
    save("rank0.onnx", rank0);
    save("rank1.onnx", rank1);
  }
  static std::string spec(const std::string &edit = "") {
    std::string s = "shardproof: 1\n"
                    "reference: ref.onnx\n"
                    "implementation:\n"
                    "  world_size: 2\n"
                    "  ranks: rank{r}.onnx\n"
                    "symbols:\n"
                    "  n: {min: 1}\n"
                    "inputs:\n"
                    "  x: replicated\n"
                    "outputs:\n"
                    "  y: replicated\n";
    return s + edit;
  }
  // `check` on a spec with line `from` replaced by `to` (the text must occur once).
  RunResult checkWith(const std::string &from, const std::string &to, const std::string &flags = "") {
    std::string s = spec();
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos)
      s.replace(at, from.size(), to);
    return run("check " + write("s.yaml", s) + " " + flags);
  }
  static RunResult run(const std::string &args) { return shardproof::testing::runShardproof(args); }
};

#define EXPECT_SAYS(r, text) EXPECT_NE((r).out.find(text), std::string::npos) << "missing: " << (text) << "\n" << (r).out


} // namespace shardproof::testing::hostile
