// Reuse and threads must not change a result: every shipped example gives the
// same report on one thread and on two (`--jobs`), and the same verdict when
// nothing is reused (`--no-memo`: no solver result cache, no obligation
// deduplication, no entailment cache).
#include "ExampleHeader.h"
#include "Run.h"

#include <gtest/gtest.h>

using shardproof::testing::runShardproof;

// The sanitizer build runs our code about 30 times slower; there an example
// whose header says HEAVY is checked once (ExamplesTest), not three times more.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

namespace {

// The report's verdict line ("VERIFIED: ...", "REFUTED at module ...", "UNKNOWN: ...").
std::string verdictLine(const std::string &out) {
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const char *v : {"VERIFIED", "REFUTED", "UNKNOWN"})
      if (line.rfind(v, 0) == 0)
        return line;
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  return "(no verdict line)";
}

class EveryExample : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryExample, SameReportOnTwoThreadsAndSameVerdictWithoutMemoization) {
  std::string spec = std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples/" + GetParam();
  if (auto h = shardproof::testing::readExampleHeader(spec); kSanitized && !h.heavy.empty())
    GTEST_SKIP() << "HEAVY under the sanitizers: " << h.heavy;
  auto one = runShardproof("check --jobs 1 " + spec);
  auto two = runShardproof("check --jobs 2 " + spec);
  EXPECT_EQ(two.exitCode, one.exitCode);
  EXPECT_EQ(two.out, one.out) << "the report depends on the thread count";
  auto noMemo = runShardproof("check --no-memo " + spec);
  EXPECT_EQ(noMemo.exitCode, one.exitCode);
  EXPECT_EQ(verdictLine(noMemo.out), verdictLine(one.out)) << "memoization changed the verdict";
}

INSTANTIATE_TEST_SUITE_P(Examples, EveryExample, ::testing::ValuesIn(shardproof::testing::exampleSpecs()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           return shardproof::testing::exampleTestName(i.param);
                         });

TEST(Jobs, ZeroThreadsIsAUserError) {
  auto r = runShardproof("check --jobs 0 " + std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples/mlp_tp2.yaml");
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.out.find("--jobs"), std::string::npos) << r.out;
}

} // namespace
