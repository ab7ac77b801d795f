#include "shardproof/report/RelationFile.h"

#include <llvm/Support/Path.h>
#include "shardproof/support/YamlDocuments.h"

#include <yaml-cpp/depthguard.h> // YAML::DeepRecursion
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace shardproof::report {

using namespace relation;

namespace {

constexpr const char *kFormatKey = "shardproof_relations";
constexpr int kFormatVersion = 1;

// The JSON report's names, so the two machine-readable outputs agree.
const char *statusName(RelationRow::Status s) {
  switch (s) {
  case RelationRow::Input: return "input";
  case RelationRow::Matched: return "matched";
  case RelationRow::View: return "view";
  case RelationRow::Unmatched: return "unmatched";
  case RelationRow::Unsupported: return "unsupported";
  }
  return "?";
}
const std::vector<std::string> kStatuses = {"input", "matched", "view", "unmatched", "unsupported"};

// ---------------------------------------------------------------- writing

bool isReservedPlain(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char *w : {"null", "true", "false", "yes", "no", "on", "off", "y", "n"})
    if (s == w)
      return true;
  return false;
}

// A scalar is written plain only when it cannot be misread in a flow map (no
// `,{}[]:#` or quotes, no leading indicator, not a YAML keyword); anything else
// is double-quoted. Tensor names like /attn/q_proj/MatMul_output_0 stay plain.
bool plainIsSafe(const std::string &s) {
  if (s.empty() || isReservedPlain(s))
    return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == '/'))
    return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-'))
      return false;
  return true;
}

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    default:
      if (c < 0x20 || c == 0x7f) {
        const char *hex = "0123456789abcdef";
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

std::string scalar(const std::string &s) { return plainIsSafe(s) ? s : quoted(s); }

std::string baseName(const std::string &path) { return llvm::sys::path::filename(path).str(); }

// ---------------------------------------------------------------- reading

// Thrown inside this file only and turned into a user error at the entry point,
// which keeps the validation helpers below free of error plumbing (the spec
// loader does the same).
struct Malformed {
  std::string message;
  SrcLoc loc;
};
[[noreturn]] void fail(std::string message, SrcLoc loc) { throw Malformed{std::move(message), std::move(loc)}; }

SrcLoc locOf(const std::string &file, const YAML::Mark &m) {
  if (m.is_null())
    return SrcLoc{file, 0, 0};
  return SrcLoc{file, m.line + 1, m.column + 1};
}
SrcLoc locOf(const std::string &file, const YAML::Node &n, const SrcLoc &fallback) {
  if (!n.IsDefined() || n.IsNull() || n.Mark().is_null())
    return fallback;
  return locOf(file, n.Mark());
}

std::string kindOf(const YAML::Node &n) {
  if (!n.IsDefined() || n.IsNull())
    return "nothing";
  if (n.IsMap())
    return "a map";
  if (n.IsSequence())
    return "a list";
  return "'" + n.Scalar() + "'";
}

struct Field {
  std::string key;
  YAML::Node value;
  SrcLoc keyLoc, valueLoc;
};

// A map's pairs in file order; a repeated or unknown key is an error (yaml-cpp
// keeps duplicates and would let a lookup see only one of them).
std::vector<Field> fieldsOf(const std::string &file, const YAML::Node &node, const std::string &what,
                            const SrcLoc &where, const std::vector<std::string> &allowed) {
  if (!node.IsMap())
    fail(what + " must be a map, got " + kindOf(node), where);
  std::vector<Field> out;
  for (const auto &kv : node) {
    SrcLoc kl = locOf(file, kv.first, where);
    if (!kv.first.IsScalar())
      fail("keys of " + what + " must be plain names, got " + kindOf(kv.first), kl);
    std::string key = kv.first.Scalar();
    for (auto &f : out)
      if (f.key == key)
        fail("duplicate key '" + key + "' in " + what + " (first given at line " + std::to_string(f.keyLoc.line) +
                 ")",
             kl);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (size_t i = 0; i < allowed.size(); ++i)
        list += (i ? ", '" : "'") + allowed[i] + "'";
      fail("unknown key '" + key + "' in " + what + didYouMean(key, allowed) + " (allowed keys: " + list + ")", kl);
    }
    out.push_back({key, kv.second, kl, locOf(file, kv.second, kl)});
  }
  return out;
}

const Field *findField(const std::vector<Field> &fs, const std::string &key) {
  for (auto &f : fs)
    if (f.key == key)
      return &f;
  return nullptr;
}

std::string text(const Field &f, const std::string &what) {
  if (!f.value.IsScalar() || f.value.Scalar().empty())
    fail(what + " must be a non-empty string, got " + kindOf(f.value), f.valueLoc);
  return f.value.Scalar();
}

RelationFile parseDocument(const std::string &file, const YAML::Node &root) {
  const SrcLoc top{file, 1, 1};
  if (!root.IsDefined() || root.IsNull())
    fail("the relations file is empty; expected a map with '" + std::string(kFormatKey) +
             "' and 'relations' (write one with `shardproof infer SPEC -o FILE`)",
         top);
  auto fields = fieldsOf(file, root, "the relations file", top, {kFormatKey, "verdict", "relations"});

  const Field *version = findField(fields, kFormatKey);
  if (!version)
    fail("the relations file is missing '" + std::string(kFormatKey) + ": " + std::to_string(kFormatVersion) +
             "' (is it a relation file written by `shardproof infer`?)",
         top);
  if (!version->value.IsScalar() || version->value.Scalar() != std::to_string(kFormatVersion))
    fail("unsupported relation file version " + kindOf(version->value) + "; this shardproof reads version " +
             std::to_string(kFormatVersion),
         version->valueLoc);

  RelationFile out;
  if (const Field *v = findField(fields, "verdict"))
    out.verdict = text(*v, "'verdict'");

  const Field *list = findField(fields, "relations");
  if (!list)
    fail("the relations file is missing the 'relations' list", top);
  if (!list->value.IsSequence())
    fail("'relations' must be a list, got " + kindOf(list->value), list->valueLoc);

  std::unordered_map<std::string, int> firstLine; // tensor -> line of its first entry
  for (const YAML::Node &item : list->value) {
    SrcLoc where = locOf(file, item, list->valueLoc);
    auto fs = fieldsOf(file, item, "a relation entry", where, {"tensor", "module", "op", "status", "relation"});
    RelationEntry e;
    e.loc = where;
    for (const char *key : {"tensor", "status", "relation"})
      if (!findField(fs, key))
        fail(std::string("relation entry is missing required key '") + key + "'", where);
    for (const Field &f : fs) {
      std::string what = "'" + f.key + "'";
      if (f.key == "tensor")
        e.tensor = text(f, what);
      else if (f.key == "module")
        e.module = text(f, what);
      else if (f.key == "op")
        e.op = text(f, what);
      else if (f.key == "relation")
        e.relation = text(f, what);
      else if (f.key == "status") {
        e.status = text(f, what);
        if (std::find(kStatuses.begin(), kStatuses.end(), e.status) == kStatuses.end())
          fail("unknown status '" + e.status + "'" + didYouMean(e.status, kStatuses) +
                   " (one of input, matched, view, unmatched, unsupported)",
               f.valueLoc);
      }
    }
    auto [it, fresh] = firstLine.emplace(e.tensor, where.line);
    if (!fresh)
      fail("tensor '" + e.tensor + "' is listed twice (first at line " + std::to_string(it->second) + ")", where);
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::string describe(const RelationEntry &e) {
  std::string s = e.tensor;
  if (!e.module.empty() || !e.op.empty()) {
    s += " (";
    if (!e.module.empty())
      s += "module " + e.module + (e.op.empty() ? "" : ", ");
    s += e.op + ")";
  }
  return s;
}

// Up to `max` tensor names, then how many more: enough to find them in the file.
template <typename T, typename Name> std::string someNames(const std::vector<T> &xs, Name name, size_t max = 5) {
  std::string s;
  for (size_t i = 0; i < xs.size() && i < max; ++i)
    s += (i ? ", " : "") + name(xs[i]);
  if (xs.size() > max)
    s += " and " + std::to_string(xs.size() - max) + " more";
  return s;
}

} // namespace

std::vector<RelationEntry> recordedEntries(const Result &r) {
  std::vector<RelationEntry> out;
  for (const RelationRow &row : r.rows) {
    if (row.op == "Constant")
      continue;
    out.push_back({row.tensor, row.module, row.status == RelationRow::Input ? "" : row.op, statusName(row.status),
                   row.relation, {}});
  }
  return out;
}

std::string writeRelationFile(const Result &r, const Context &ctx) {
  std::string s;
  s += "# shardproof relations: reference " + baseName(ctx.reference) + ", " + std::to_string(ctx.rankPaths.size()) +
       " ranks (" + baseName(ctx.specPath) + ")\n";
  s += "# One entry per reference tensor, in graph order (Constant nodes left out): the\n"
       "# relation proven between it and the rank tensors. Written by `shardproof infer`;\n"
       "# `shardproof check SPEC --relations FILE` reports what changed. See docs/relation-files.md.\n";
  s += std::string(kFormatKey) + ": " + std::to_string(kFormatVersion) + "\n";
  s += std::string("verdict: ") + toString(r.verdict) + "\n";
  auto entries = recordedEntries(r);
  if (entries.empty())
    return s + "relations: []\n";
  s += "relations:\n";
  // Key order is fixed and the relation comes last: it is the long part, and a
  // change to it then reads as a change at the end of one line.
  for (const RelationEntry &e : entries) {
    s += "  - {tensor: " + scalar(e.tensor);
    if (!e.module.empty())
      s += ", module: " + scalar(e.module);
    if (!e.op.empty())
      s += ", op: " + scalar(e.op);
    s += ", status: " + e.status + ", relation: " + quoted(e.relation) + "}\n";
  }
  return s;
}

llvm::Expected<RelationFile> parseRelationFile(const std::string &text, const std::string &path) {
  try {
    try {
      YamlDocuments docs = loadYamlDocuments(text);
      if (docs.more)
        fail("the relations file holds more than one YAML document (a '---' line, or a stray ',' at the top "
             "level, which YAML reads as a new one); expected one",
             locOf(path, docs.secondAt));
      return parseDocument(path, docs.first);
    } catch (const YAML::DeepRecursion &e) {
      // yaml-cpp's own guard against stack exhaustion; its message says only "bad file".
      fail("invalid YAML: nested more than " + std::to_string(e.depth() - 1) + " levels deep", locOf(path, e.mark));
    } catch (const YAML::Exception &e) {
      // Syntax errors (an unterminated quote, a bad indent); the mark says where.
      fail("invalid YAML: " + e.msg, locOf(path, e.mark));
    }
  } catch (const Malformed &m) {
    return userError(m.message, m.loc);
  } catch (const std::exception &e) {
    return internalError(std::string("unexpected exception reading a relation file: ") + e.what());
  }
}

llvm::Expected<RelationFile> readRelationFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return userError("cannot read relations file '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return userError("cannot read relations file '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseRelationFile(ss.str(), path);
}

namespace {
RelationDiff diffEntries(const RelationFile &recorded, std::vector<RelationEntry> current, std::string verdict) {
  RelationDiff d;
  d.recordedVerdict = recorded.verdict;
  d.verdict = std::move(verdict);
  std::unordered_map<std::string, const RelationEntry *> before;
  for (const RelationEntry &e : recorded.entries)
    before.emplace(e.tensor, &e);
  std::unordered_set<std::string> seen;
  for (RelationEntry &now : current) {
    seen.insert(now.tensor);
    auto it = before.find(now.tensor);
    if (it == before.end())
      d.added.push_back(std::move(now));
    else if (it->second->status != now.status || it->second->relation != now.relation)
      d.changed.push_back({*it->second, std::move(now)});
  }
  for (const RelationEntry &e : recorded.entries)
    if (!seen.count(e.tensor))
      d.removed.push_back(e);
  return d;
}
} // namespace

RelationDiff diffRelations(const RelationFile &recorded, const Result &current) {
  return diffEntries(recorded, recordedEntries(current), toString(current.verdict));
}

RelationDiff diffRelationFiles(const RelationFile &before, const RelationFile &after) {
  return diffEntries(before, after.entries, after.verdict);
}

void printRelationFileDiff(llvm::raw_ostream &os, const RelationDiff &d, const std::string &before,
                           const std::string &after) {
  if (d.empty()) {
    os << "relations: " << after << " rebuilds every tensor as " << before << " does\n";
    return;
  }
  os << "RELATIONS CHANGED from " << before << " to " << after << ": " << d.changed.size() << " changed, "
     << d.added.size() << " added, " << d.removed.size() << " removed\n";
  for (const RelationChange &c : d.changed) {
    os << "  " << describe(c.current) << " (" << before << ":" << c.recorded.loc.line << ", " << after << ":"
       << c.current.loc.line << ")\n";
    os << "    old: " << c.recorded.status << " " << c.recorded.relation << "\n";
    os << "    new: " << c.current.status << " " << c.current.relation << "\n";
  }
  for (const RelationEntry &e : d.added)
    os << "  added: " << describe(e) << " " << e.status << " " << e.relation << "\n";
  for (const RelationEntry &e : d.removed)
    os << "  removed: " << describe(e) << " (was " << e.status << " " << e.relation << ")\n";
  if (!d.recordedVerdict.empty() && d.recordedVerdict != d.verdict)
    os << "verdict: " << d.recordedVerdict << " -> " << d.verdict << "\n";
}

void printRelationDiff(llvm::raw_ostream &os, const RelationDiff &d, const std::string &path, const Context &ctx,
                       bool brief) {
  if (brief) {
    if (d.empty())
      os << "relations: unchanged from " << path << "\n";
    else
      os << "RELATIONS CHANGED from " << path << ": " << d.changed.size() << " changed, " << d.added.size()
         << " added, " << d.removed.size() << " removed"
         << (d.changed.empty() ? "" : "; first: " + d.changed.front().current.tensor) << "\n";
    return;
  }
  os << "\nRelations compared with " << path << ": ";
  if (d.empty()) {
    os << "unchanged\n";
  } else {
    os << d.changed.size() << " changed, " << d.added.size() << " added, " << d.removed.size() << " removed\n";
    if (!d.changed.empty()) {
      const RelationChange &c = d.changed.front();
      os << "  first change: " << describe(c.current) << ", recorded at " << c.recorded.loc.str() << "\n";
      bool statusChanged = c.recorded.status != c.current.status;
      os << "    recorded: " << c.recorded.relation << (statusChanged ? "  (" + c.recorded.status + ")" : "") << "\n";
      os << "    now:      " << c.current.relation << (statusChanged ? "  (" + c.current.status + ")" : "") << "\n";
      if (d.changed.size() > 1) {
        std::vector<RelationChange> rest(d.changed.begin() + 1, d.changed.end());
        os << "  also changed: " << someNames(rest, [](const RelationChange &x) { return x.current.tensor; }) << "\n";
      }
    }
    auto name = [](const RelationEntry &e) { return e.tensor; };
    if (!d.added.empty())
      os << "  added (not in the file): " << someNames(d.added, name) << "\n";
    if (!d.removed.empty())
      os << "  removed (in the file, not in the reference now): " << someNames(d.removed, name) << "\n";
  }
  if (!d.recordedVerdict.empty() && d.recordedVerdict != d.verdict)
    os << "note: the file was recorded with verdict " << d.recordedVerdict << "; the verdict now is " << d.verdict
       << "\n";
  if (!d.empty())
    os << "RELATIONS CHANGED: if the change is intended, `shardproof infer " << ctx.specPath << " -o " << path
       << "` records the new relations\n";
}

int exitCode(Verdict v, const RelationDiff &d) {
  int code = exitCode(v);
  return code == 0 && !d.empty() ? kExitRelationsChanged : code;
}

} // namespace shardproof::report
