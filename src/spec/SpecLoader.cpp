// loadSpec / parseSpec: the top level of the YAML spec, plus the small Spec and
// SymbolTable helpers.
#include "Lexer.h"
#include "Yaml.h"

#include "shardproof/support/YamlDocuments.h"

#include <yaml-cpp/depthguard.h> // YAML::DeepRecursion

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardproof::spec {

std::optional<smt::Expr> SymbolTable::lookup(const std::string &name) const {
  if (allowAny || std::find(names.begin(), names.end(), name) != names.end())
    return smt::Expr::intVar(name);
  return std::nullopt;
}

SymbolTable Spec::symbolTable() const {
  SymbolTable t;
  for (auto &s : symbols)
    t.names.push_back(s.name);
  return t;
}

llvm::Expected<std::optional<Placement>> Spec::outputPlacement(const std::string &name) const {
  for (auto &[n, p] : outputs)
    if (n == name)
      return std::optional<Placement>(p);
  static const std::string kPrefix = "grad:";
  if (!gradsLikeParams || name.compare(0, kPrefix.size(), kPrefix) != 0)
    return std::optional<Placement>();
  const std::string param = name.substr(kPrefix.size());
  for (auto &[n, p] : inputs) {
    if (n != param)
      continue;
    if (p.kind == Placement::Kind::Relation)
      return userError("output '" + name + "': 'grads: like_params' cannot place it like '" + param +
                           "', whose placement is a relation expression; give '" + name +
                           "' a placement under outputs",
                       gradsLoc);
    Placement g = p;
    g.values.reset(); // value ranges and exact values are about the parameter, not its gradient
    g.exactValue = false;
    g.elements.clear();
    if (!g.as.empty())
      g.as = kPrefix + g.as;
    return std::optional<Placement>(g);
  }
  return std::optional<Placement>();
}

std::string Spec::rankName(const std::string &refName, const Placement &p, int r) {
  if (p.as.empty())
    return refName;
  std::string out = p.as, rs = std::to_string(r);
  for (size_t at = out.find("{r}"); at != std::string::npos; at = out.find("{r}", at + rs.size()))
    out.replace(at, 3, rs);
  return out;
}

namespace detail {
namespace {

constexpr int64_t kMaxWorldSize = 65536;

const std::vector<std::string> kTopKeys = {"shardproof", "reference", "implementation",
                                           "symbols",    "constraints", "inputs", "outputs",
                                           "layers",     "grads"};

std::string replaceRank(std::string s, int r) {
  std::string rs = std::to_string(r);
  for (size_t at = s.find("{r}"); at != std::string::npos; at = s.find("{r}", at + rs.size()))
    s.replace(at, 3, rs);
  return s;
}

class Loader {
public:
  Loader(const YamlDoc &doc, Spec &spec) : doc_(doc), spec_(spec) {
    std::filesystem::path dir = std::filesystem::path(doc.file).parent_path();
    spec_.path = doc.file;
    spec_.dir = dir.empty() ? "." : dir.string();
  }

  void load(const YAML::Node &root) {
    SrcLoc start{doc_.file, 1, 1};
    if (!root.IsDefined() || root.IsNull())
      fail("the spec is empty; it needs at least 'shardproof', 'reference' and "
           "'implementation'",
           start);
    MapView top(doc_, root, "the spec", start);
    top.allowOnly(kTopKeys);

    const auto &ver = top.require("shardproof");
    int64_t v = getInt(ver, "'shardproof' (the spec format version)");
    if (v != 1)
      fail("unsupported spec format version " + std::to_string(v) +
               "; this shardproof reads 'shardproof: 1'",
           ver.valueLoc);
    spec_.version = 1;

    const auto &ref = top.require("reference");
    spec_.reference = resolve(getString(ref, "'reference'"));
    spec_.referenceLoc = ref.valueLoc;

    implementation(top.require("implementation"));
    if (const auto *s = top.find("symbols"))
      symbols(*s);

    // Expressions may name dim_params known only from the ONNX files.
    SymbolTable any = spec_.symbolTable();
    any.allowAny = true;

    if (const auto *c = top.find("constraints"))
      constraints(*c, any);
    if (const auto *in = top.find("inputs"))
      placements(*in, "input", spec_.inputs, any);
    if (const auto *out = top.find("outputs"))
      placements(*out, "output", spec_.outputs, any);
    if (const auto *g = top.find("grads")) {
      std::string how = getString(*g, "'grads'");
      if (how != "like_params")
        fail("'grads' takes 'like_params' (each output grad:<p> placed like input <p>), got '" + how + "'",
             g->valueLoc);
      spec_.gradsLikeParams = true;
      spec_.gradsLoc = g->valueLoc;
    }
    if (const auto *layers = top.find("layers"))
      placements(*layers, "layer", spec_.layers, any);
  }

private:
  std::string resolve(const std::string &p) const {
    return (std::filesystem::path(spec_.dir) / p).lexically_normal().string();
  }

  void implementation(const MapView::Entry &e) {
    MapView m(doc_, e.value, "'implementation'", e.keyLoc);
    m.allowOnly({"world_size", "ranks"});
    const auto &ws = m.require("world_size");
    int64_t n = getInt(ws, "'world_size'");
    if (n < 1)
      fail("'world_size' must be at least 1, got " + std::to_string(n), ws.valueLoc);
    // A typo like 10000000 would otherwise allocate paths and NAME@* args for every rank.
    if (n > kMaxWorldSize)
      fail("'world_size' " + std::to_string(n) + " is larger than the supported maximum " +
               std::to_string(kMaxWorldSize),
           ws.valueLoc);
    spec_.worldSize = static_cast<int>(n);

    const auto &ranks = m.require("ranks");
    spec_.ranksLoc = ranks.valueLoc;
    if (ranks.value.IsSequence()) {
      if (static_cast<int64_t>(ranks.value.size()) != n)
        fail("'ranks' lists " + std::to_string(ranks.value.size()) +
                 " files but world_size is " + std::to_string(n),
             ranks.valueLoc);
      for (const YAML::Node &item : ranks.value) {
        SrcLoc l = doc_.loc(item, ranks.valueLoc);
        if (!item.IsScalar() || item.Scalar().empty())
          fail("each entry of 'ranks' must be a file path, got " + kindOf(item), l);
        spec_.rankPaths.push_back(resolve(item.Scalar()));
      }
      return;
    }
    if (!ranks.value.IsScalar() || ranks.value.Scalar().empty())
      fail("'ranks' must be a path pattern containing '{r}' or a list of " +
               std::to_string(n) + " paths, got " + kindOf(ranks.value),
           ranks.valueLoc);
    const std::string &pattern = ranks.value.Scalar();
    if (n > 1 && pattern.find("{r}") == std::string::npos)
      fail("'ranks' pattern '" + pattern + "' has no '{r}', so all " + std::to_string(n) +
               " ranks would read the same file; use e.g. 'model_rank{r}.onnx' or a list",
           ranks.valueLoc);
    for (int r = 0; r < spec_.worldSize; ++r)
      spec_.rankPaths.push_back(resolve(replaceRank(pattern, r)));
  }

  void symbols(const MapView::Entry &e) {
    if (e.value.IsNull())
      return;
    MapView m(doc_, e.value, "'symbols'", e.keyLoc);
    for (auto &s : m.entries()) {
      if (!isIdentifier(s.key) || s.key == "and" || s.key == "or" || s.key == "not")
        fail("symbol name '" + s.key +
                 "' cannot be used in expressions; use letters, digits, '_' and '.', "
                 "starting with a letter or '_'",
             s.keyLoc);
      SymbolSpec sym{s.key, std::nullopt, std::nullopt, std::nullopt, s.keyLoc};
      if (!s.value.IsNull()) {
        std::string what = "symbol '" + s.key + "'";
        MapView b(doc_, s.value, what, s.keyLoc);
        b.allowOnly({"min", "max", "value"});
        // Symbols are sizes (dim_params): a negative bound is a typo, never a size.
        auto size = [&](const char *key) -> std::optional<int64_t> {
          const auto *x = b.find(key);
          if (!x)
            return std::nullopt;
          int64_t v = getInt(*x, what + ": '" + key + "'");
          if (v < 0)
            fail(what + ": '" + key + "' is " + std::to_string(v) + ", but a size cannot be negative", x->valueLoc);
          return v;
        };
        sym.min = size("min");
        sym.max = size("max");
        sym.value = size("value");
        if (sym.min && sym.max && *sym.min > *sym.max)
          fail(what + " has min " + std::to_string(*sym.min) + " greater than max " +
                   std::to_string(*sym.max),
               b.find("max")->valueLoc);
        if (sym.value && ((sym.min && *sym.value < *sym.min) || (sym.max && *sym.value > *sym.max)))
          fail(what + " has value " + std::to_string(*sym.value) + " outside its bounds",
               b.find("value")->valueLoc);
      }
      spec_.symbols.push_back(std::move(sym));
    }
  }

  void constraints(const MapView::Entry &e, const SymbolTable &syms) {
    if (e.value.IsNull())
      return;
    if (!e.value.IsSequence())
      fail("'constraints' must be a list of conditions such as [\"seq % 2 == 0\"], got " +
               kindOf(e.value),
           e.valueLoc);
    for (const YAML::Node &item : e.value) {
      SrcLoc l = doc_.loc(item, e.valueLoc);
      if (!item.IsScalar() || item.Scalar().empty())
        fail("each constraint must be a string such as \"seq % 2 == 0\", got " + kindOf(item), l);
      Constraint c;
      c.text = item.Scalar();
      c.loc = l;
      c.expr = parseConstraintOrThrow(c.text, syms, doc_.textLoc(item, l));
      spec_.constraints.push_back(std::move(c));
    }
  }

  void placements(const MapView::Entry &e, const std::string &side,
                  std::vector<std::pair<std::string, Placement>> &out, const SymbolTable &syms) {
    if (e.value.IsNull())
      return;
    MapView m(doc_, e.value, "'" + e.key + "'", e.keyLoc);
    for (auto &entry : m.entries()) {
      Placement p = parsePlacement(doc_, entry, side, spec_.worldSize, syms);
      if (side != "input" && (p.valueBinding || p.values))
        fail(side + " '" + entry.key + "': value bindings ('values', 'value', 'fill', 'each', 'elements') describe inputs only",
             entry.valueLoc);
      out.emplace_back(entry.key, std::move(p));
    }
  }

  const YamlDoc &doc_;
  Spec &spec_;
};

} // namespace
} // namespace detail

llvm::Expected<Spec> parseSpec(const std::string &text, const std::string &path) {
  return detail::guarded<Spec>([&] {
    detail::YamlDoc doc{path, text};
    Spec spec;
    try {
      YamlDocuments docs = loadYamlDocuments(text);
      // A second `---` document would otherwise be ignored without a word.
      if (docs.more)
        detail::fail("the spec file holds more than one YAML document (a '---' line, or a stray ',' at the top "
                     "level, which YAML reads as a new one); expected one",
                     doc.loc(docs.secondAt));
      detail::Loader(doc, spec).load(docs.first);
    } catch (const YAML::DeepRecursion &e) {
      // yaml-cpp's own guard against stack exhaustion; its message says only "bad file".
      detail::fail("invalid YAML: nested more than " + std::to_string(e.depth() - 1) + " levels deep", doc.loc(e.mark));
    } catch (const YAML::Exception &e) {
      // Syntax errors and any conversion yaml-cpp rejects; the mark says where.
      detail::fail("invalid YAML: " + e.msg, doc.loc(e.mark));
    }
    return spec;
  });
}

llvm::Expected<Spec> loadSpec(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return userError("cannot read spec file '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return userError("cannot read spec file '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return userError("cannot read spec file '" + path + "': read error");
  return parseSpec(ss.str(), path);
}

} // namespace shardproof::spec
