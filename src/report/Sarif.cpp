// The check as SARIF 2.1.0, so a code-review host can annotate the spec that
// was checked: one result per failure (refuted node, unknown reason).
#include "shardproof/report/RelationFile.h"
#include "shardproof/report/Report.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

namespace shardproof::report {

using namespace relation;
namespace json = llvm::json;

namespace {
struct Rule {
  const char *id, *name, *text;
};
// One rule per failure kind; review tools group and filter results by rule.
const Rule kRules[] = {
    {"SP001", "NoRelation", "A reference node has no proven relation to the ranks' nodes."},
    {"SP002", "OutputMismatch", "An output differs from the relation the spec states."},
    {"SP003", "ObligationFailed", "A size or coverage obligation does not hold."},
    {"SP004", "UnsupportedOp", "An operator or attribute shardproof does not model."},
    {"SP005", "SolverLimit", "The solver could not decide a query within its limits."},
    {"SP006", "ChangedRelation", "A tensor is rebuilt from the ranks differently than the relation file records."},
    // Bug classes, when the check can tell which one a failure is.
    {"SP007", "MissingReduction",
     "Partial sums reach a node that needs their total: an all-reduce or reduce-scatter is missing or reduces something else."},
    {"SP008", "UncoveredElements", "The ranks compute only part of a reference tensor: some elements have no counterpart."},
    {"SP009", "MaskLeak", "Content the reference never reads (padding) reaches a real output element: a mask is missing or wrong."},
};

const Rule &ruleFor(const Failure &f) {
  switch (f.bugClass) {
  case BugClass::MissingReduction: return kRules[6];
  case BugClass::UncoveredElements: return kRules[7];
  case BugClass::MaskLeak: return kRules[8];
  case BugClass::None: break;
  }
  switch (f.kind) {
  case Failure::NoRelation: return kRules[0];
  case Failure::OutputMismatch: return kRules[1];
  case Failure::Obligation: return kRules[2];
  case Failure::Unsupported: return kRules[3];
  case Failure::SolverUnknown: return kRules[4];
  }
  return kRules[4];
}

// artifactLocation.uri is a URI reference: a path goes in with every byte
// outside RFC 3986's unreserved characters and '/' percent-encoded (a space, a
// non-ASCII name, a ':' that would read as a scheme).
std::string uriOf(llvm::StringRef path) {
  static const char *hex = "0123456789ABCDEF";
  std::string uri;
  for (unsigned char c : path) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~' || c == '/')
      uri += char(c);
    else
      uri += {'%', hex[c >> 4], hex[c & 15]};
  }
  return uri;
}

// The annotation sits on the placement of the failing tensor when the spec
// states one, else on the ranks line (the sharding under review), else line 1.
json::Object specLocation(const Context &ctx, const std::string &tensor) {
  SrcLoc loc = ctx.ranksLoc;
  for (auto &[name, l] : ctx.placementLocs)
    if (name == tensor && l.line > 0)
      loc = l;
  json::Object region{{"startLine", loc.line > 0 ? loc.line : 1}};
  if (loc.line > 0 && loc.col > 0)
    region["startColumn"] = loc.col;
  return json::Object{{"physicalLocation",
                       json::Object{{"artifactLocation", json::Object{{"uri", uriOf(ctx.specPath)}}},
                                    {"region", std::move(region)}}}};
}

// A Python line behind the failure (capture package doc_strings), as a related
// location: a path under the working directory is given relative to it, as
// review hosts resolve URIs against the checkout.
json::Object pythonLocation(const SourceSite &site, int id) {
  std::string path = site.loc.file;
  llvm::SmallString<256> cwd;
  if (!llvm::sys::fs::current_path(cwd)) {
    std::string prefix = std::string(cwd.str()) + "/";
    if (path.rfind(prefix, 0) == 0)
      path = path.substr(prefix.size());
  }
  std::string text = site.role + (site.function.empty() ? "" : " (in " + site.function + ")");
  return json::Object{{"id", id},
                      {"physicalLocation",
                       json::Object{{"artifactLocation", json::Object{{"uri", uriOf(path)}}},
                                    {"region", json::Object{{"startLine", site.loc.line}}}}},
                      {"message", json::Object{{"text", text}}}};
}

std::string messageFor(const Failure &f) {
  std::string m = f.message;
  if (!f.module.empty())
    m += " (module " + f.module + ")";
  if (f.cex && f.cex->replayed)
    m += llvm::formatv("; counterexample at {0}[...] confirmed by replay: expected {1}, actual {2}",
                       f.cex->tensor, f.cex->expectedValue, f.cex->actualValue)
             .str();
  return m;
}
} // namespace

std::string toSarif(const Result &r, const Context &ctx, const RelationDiff *changes) {
  json::Array rules;
  for (const Rule &ru : kRules)
    rules.push_back(json::Object{{"id", ru.id}, {"name", ru.name},
                                 {"shortDescription", json::Object{{"text", ru.text}}}});
  json::Array results;
  for (const Failure &f : r.failures) {
    const Rule &ru = ruleFor(f);
    // An error only in a REFUTED run: a node without a relation in an UNKNOWN
    // run is not shown wrong, so it stays a warning like any undecided step.
    bool refuted = r.verdict == Verdict::Refuted &&
                   (f.kind == Failure::NoRelation || f.kind == Failure::OutputMismatch ||
                    f.kind == Failure::Obligation);
    json::Object props{{"node", f.refNode}, {"module", f.module}, {"tensor", f.tensor}};
    json::Object res{{"ruleId", ru.id},
                     {"level", refuted ? "error" : "warning"},
                     {"message", json::Object{{"text", messageFor(f)}}},
                     {"locations", json::Array{specLocation(ctx, f.tensor)}}};
    // The spec line is where the claim is; the user's code is where to look.
    json::Array related;
    for (const SourceSite &site : f.sources)
      related.push_back(pythonLocation(site, static_cast<int>(related.size())));
    if (!related.empty())
      res["relatedLocations"] = std::move(related);
    res["properties"] = std::move(props);
    results.push_back(std::move(res));
  }
  // An UNKNOWN verdict without a failure still needs its reason on the spec.
  if (r.failures.empty() && r.verdict == Verdict::Unknown)
    results.push_back(json::Object{{"ruleId", kRules[4].id},
                                   {"level", "warning"},
                                   {"message", json::Object{{"text", "UNKNOWN: " + r.reason}}},
                                   {"locations", json::Array{specLocation(ctx, "")}}});
  // A changed relation is flagged where it is recorded, so the reviewer sees
  // the old line next to the spec edit that changed it.
  if (changes)
    for (const RelationChange &c : changes->changed) {
      const SrcLoc &l = c.recorded.loc;
      json::Object region{{"startLine", l.line > 0 ? l.line : 1}};
      if (l.line > 0 && l.col > 0)
        region["startColumn"] = l.col;
      std::string text = "relation of '" + c.current.tensor + "'" +
                         (c.current.module.empty() ? "" : " (module " + c.current.module + ")") +
                         " changed: " + c.recorded.status + " " + c.recorded.relation + " -> " +
                         c.current.status + " " + c.current.relation;
      json::Object loc{{"physicalLocation",
                        json::Object{{"artifactLocation", json::Object{{"uri", uriOf(l.file.empty() ? ctx.specPath : l.file)}}},
                                     {"region", std::move(region)}}}};
      results.push_back(json::Object{{"ruleId", kRules[5].id},
                                     {"level", "error"},
                                     {"message", json::Object{{"text", std::move(text)}}},
                                     {"locations", json::Array{std::move(loc)}},
                                     {"properties", json::Object{{"tensor", c.current.tensor}, {"module", c.current.module}}}});
    }
  json::Object driver{{"name", "shardproof"},
                      {"rules", std::move(rules)}};
  json::Object run{{"tool", json::Object{{"driver", std::move(driver)}}},
                   {"results", std::move(results)},
                   {"properties", json::Object{{"verdict", toString(r.verdict)}}}};
  json::Object top{{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
                   {"version", "2.1.0"},
                   {"runs", json::Array{std::move(run)}}};
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", json::Value(std::move(top)));
  os.flush();
  return s + "\n";
}

} // namespace shardproof::report
