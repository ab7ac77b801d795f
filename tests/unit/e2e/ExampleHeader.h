// An example spec states its own expectation in its header comment, as lit
// tests do, so adding an example is adding one file:
//
//   # What the case is (and which bug, if any).
//   # VERDICT: REFUTED                 VERIFIED | REFUTED | UNKNOWN
//   # SAYS: REFUTED at module fc2      zero or more fragments the report contains
//   # HEAVY: why                       optional: minutes under the sanitizers, so the
//                                      memo/threads re-run (MemoJobsTest) skips it there
//
// ExamplesTest runs `shardproof check --witness` on every spec under
// specs/examples/ and holds it to its header; a spec without a VERDICT line
// fails there.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace shardproof::testing {

struct ExampleHeader {
  std::string path;           // the spec file
  std::string verdict;        // "" when the header has no VERDICT line
  int exitCode = -1;          // 0 VERIFIED, 1 REFUTED, 2 UNKNOWN
  std::vector<std::string> says;
  std::string heavy;          // HEAVY: why the sanitizer build skips its re-runs
  std::string error;          // a malformed header: what is wrong, with its line
  std::string description;    // the header's prose, joined into one line
};

inline std::string trimmed(std::string s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// Reads the leading comment block of a spec (it ends at the first line that is
/// neither a comment nor blank).
inline ExampleHeader readExampleHeader(const std::string &path) {
  ExampleHeader h;
  h.path = path;
  std::ifstream in(path);
  if (!in) {
    h.error = path + ": cannot be read";
    return h;
  }
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    std::string t = trimmed(line);
    if (t.empty())
      continue;
    if (t[0] != '#')
      break;
    std::string body = trimmed(t.substr(1));
    auto where = path + ":" + std::to_string(lineNo) + ": ";
    if (body.rfind("VERDICT:", 0) == 0) {
      std::string v = trimmed(body.substr(8));
      static const char *kVerdicts[] = {"VERIFIED", "REFUTED", "UNKNOWN"};
      auto it = std::find(std::begin(kVerdicts), std::end(kVerdicts), v);
      if (!h.verdict.empty())
        h.error = where + "a second VERDICT line";
      else if (it == std::end(kVerdicts))
        h.error = where + "VERDICT must be VERIFIED, REFUTED or UNKNOWN, not '" + v + "'";
      else {
        h.verdict = v;
        h.exitCode = static_cast<int>(it - std::begin(kVerdicts));
      }
    } else if (body.rfind("SAYS:", 0) == 0) {
      std::string s = trimmed(body.substr(5));
      if (s.empty())
        h.error = where + "an empty SAYS line";
      else
        h.says.push_back(s);
    } else if (body.rfind("HEAVY:", 0) == 0) {
      h.heavy = trimmed(body.substr(6));
      if (h.heavy.empty())
        h.error = where + "a HEAVY line must say why";
    } else if (!body.empty()) {
      h.description += (h.description.empty() ? "" : " ") + body;
    }
  }
  if (h.error.empty() && h.verdict.empty())
    h.error = path + ": the header has no '# VERDICT: VERIFIED|REFUTED|UNKNOWN' line (see tests/unit/e2e/ExampleHeader.h)";
  return h;
}

/// Every spec under specs/examples/ (relation files, *.relations.yaml, are not
/// specs), sorted by name.
inline std::vector<std::string> exampleSpecs() {
  std::vector<std::string> names;
  for (auto &e : std::filesystem::directory_iterator(std::string(SHARDPROOF_SOURCE_DIR) + "/specs/examples")) {
    std::string n = e.path().filename().string();
    auto endsWith = [&](const std::string &suffix) {
      return n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (endsWith(".yaml") && !endsWith(".relations.yaml"))
      names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// A gtest parameter name for an example spec: "gpt_tp2.yaml" -> "gpt_tp2".
inline std::string exampleTestName(const std::string &spec) {
  std::string n = spec.substr(0, spec.find('.'));
  for (auto &ch : n)
    if (!isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return n;
}

} // namespace shardproof::testing
