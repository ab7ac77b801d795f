// A test fixture with its own scratch directory, removed after the test: the
// one place e2e tests make temporary files (hostile inputs, bad specs,
// generated models).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shardproof::testing {

class ScratchDir : public ::testing::Test {
protected:
  explicit ScratchDir(std::string prefix) : prefix_(std::move(prefix)) {}
  std::filesystem::path dir;
  void SetUp() override {
    // Per process and per test: ctest runs tests of one binary in parallel.
    dir = std::filesystem::path(::testing::TempDir()) /
          ("shardproof-" + prefix_ + "-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(const std::string &name) const { return (dir / name).string(); }
  std::string write(const std::string &name, const std::string &text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return path(name);
  }
  std::string read(const std::string &name) const {
    std::ifstream in(dir / name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

private:
  std::string prefix_;
};

} // namespace shardproof::testing
