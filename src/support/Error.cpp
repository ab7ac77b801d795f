#include "shardproof/support/Error.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace shardproof {

char Diag::ID = 0;

std::string SrcLoc::str() const {
  if (file.empty())
    return "";
  std::string s = file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (col > 0)
      s += ":" + std::to_string(col);
  }
  return s;
}

void Diag::log(llvm::raw_ostream &os) const {
  if (!loc_.file.empty())
    os << loc_.str() << ": ";
  switch (kind_) {
  case ErrorKind::User: os << "error: "; break;
  case ErrorKind::Unsupported: os << "unsupported: "; break;
  case ErrorKind::Internal: os << "internal error: "; break;
  }
  os << message_;
}

std::error_code Diag::convertToErrorCode() const { return llvm::inconvertibleErrorCode(); }

std::string toString(llvm::Error err) {
  std::string out;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    if (!out.empty())
      out += "\n";
    out += e.message();
  });
  return out;
}

TakenError takeError(llvm::Error err) {
  TakenError out;
  bool first = true;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    if (first) {
      out.message = e.message();
      if (e.isA<Diag>()) {
        const auto &d = static_cast<const Diag &>(e);
        out.kind = d.kind();
        out.message = d.text();
        out.loc = d.loc();
      }
      first = false;
    } else {
      out.text += "\n";
    }
    out.text += e.message();
  });
  return out;
}

std::vector<std::string> nearestNames(const std::string &name,
                                      const std::vector<std::string> &candidates,
                                      unsigned max) {
  std::vector<std::pair<unsigned, std::string>> scored;
  for (const auto &c : candidates) {
    unsigned d = llvm::StringRef(name).edit_distance(c, true, 64);
    unsigned limit = std::max<unsigned>(2, static_cast<unsigned>(name.size()) / 2);
    bool prefix = !name.empty() && (llvm::StringRef(c).startswith(name) || llvm::StringRef(name).startswith(c));
    if (d <= limit || prefix)
      scored.push_back({d, c});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](auto &a, auto &b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto &s : scored) {
    if (out.size() >= max)
      break;
    out.push_back(s.second);
  }
  return out;
}

std::string didYouMean(const std::string &name, const std::vector<std::string> &candidates) {
  auto near = nearestNames(name, candidates);
  if (near.empty())
    return "";
  std::string s = "; did you mean ";
  for (size_t i = 0; i < near.size(); ++i) {
    if (i)
      s += i + 1 == near.size() ? " or " : ", ";
    s += "'" + near[i] + "'";
  }
  return s + "?";
}

void internalFailure(const char *file, int line, const std::string &msg) {
  std::fprintf(stderr, "shardproof: internal error at %s:%d: %s\n", file, line, msg.c_str());
  std::fprintf(stderr, "This is a bug in shardproof; no verdict was produced.\n");
  std::exit(4);
}

} // namespace shardproof
