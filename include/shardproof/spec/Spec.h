// The YAML spec: which reference model, which rank models, which symbols and
// constraints, and how every reference input/output relates to the ranks.
// See docs/spec-format.md for the user-facing contract.
#pragma once

#include "shardproof/support/Error.h"
#include "shardproof/smt/Expr.h"

#include <llvm/Support/Error.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::spec {

/// Resolves an identifier in an integer expression to a symbol; returns
/// nullopt for unknown names (the parser then reports "unknown symbol" and
/// suggests the closest of `names`).
struct SymbolTable {
  std::vector<std::string> names;
  /// Accept every identifier as a symbol. loadSpec parses constraints, sizes
  /// and relations with this set, since they may name dim_params that appear
  /// only in the ONNX files; the checker validates the names afterwards.
  bool allowAny = false;
  std::optional<smt::Expr> lookup(const std::string &name) const;
};

/// A relation expression: `h@0`, `h@*`, `concat(h@*, axis=1)`, `sum(p@*)`,
/// `slice(E, axis=0, start=0, end=vocab)`, `pad(E, axis=K, before=I, after=I)`,
/// `transpose(E, perm=[1,0])`, `reshape(E, shape=[a, b])`.
struct RelExpr {
  enum class Kind { Tensor, Call };
  Kind kind = Kind::Tensor;
  SrcLoc loc;
  // Tensor: a rank tensor NAME@RANK. `NAME@*` is expanded by the parser into
  // one argument per rank (0..world_size-1) of the enclosing call.
  std::string name;
  int rank = 0;
  // Call:
  std::string fn; // concat | sum | slice | pad | transpose | reshape
  std::vector<RelExpr> args;
  struct KwArg {
    std::string key;
    std::vector<smt::Expr> values; // one value, or a list for perm/shape
    bool isList = false;
    SrcLoc loc;
  };
  std::vector<KwArg> kwargs;
  const KwArg *kwarg(const std::string &k) const {
    for (auto &a : kwargs)
      if (a.key == k)
        return &a;
    return nullptr;
  }
  std::string str() const; // canonical rendering
};

/// How a reference input or output is distributed over the ranks.
struct Placement {
  enum class Kind {
    Replicated, // every rank holds the whole tensor
    Partial,    // the tensor is the sum of the ranks' tensors
    Shard,      // concatenation of the ranks' tensors along `axis`
    Relation,   // an explicit relation expression
  };
  /// PadToMultiple: the axis is padded to a multiple of `padMultiple`, then
  /// split evenly; the pad rows on the ranks are arbitrary.
  enum class Split { Unspecified, Even, Chunk, TensorSplit, Sizes, PadToMultiple };
  Kind kind = Kind::Replicated;
  int axis = 0;
  Split split = Split::Unspecified;
  std::vector<smt::Expr> sizes;  // Split::Sizes: one per rank
  std::optional<smt::Expr> padMultiple; // Split::PadToMultiple
  std::string as;                // name on the ranks (default: same name); may hold "{r}"
  std::optional<RelExpr> relation;
  /// Inputs only: an integer tensor's element values lie in [min, max]
  /// (token ids in [0, vocab - 1]); what data-dependent lookups may assume.
  std::optional<std::pair<smt::Expr, smt::Expr>> values;
  /// Inputs only (`value: E`, `fill: E`): every element equals E exactly (then
  /// `values` is [E, E]); the input may be a rank-only input (a length passed
  /// as data) that the reference does not have.
  bool exactValue = false;
  /// Inputs only (`elements: [E0, E1, ...]`): a 1-D tensor whose i-th element
  /// is Ei exactly (offsets such as cu_seqlens); exactValue is set too.
  std::vector<smt::Expr> elements;
  /// `value`, `fill`, `each` or `elements`: a value binding, replicated on every rank.
  bool valueBinding = false;
  SrcLoc loc;
};

struct SymbolSpec {
  std::string name;
  std::optional<int64_t> min, max, value;
  SrcLoc loc;
};

struct Constraint {
  smt::Expr expr; // boolean
  std::string text;
  SrcLoc loc;
};

struct Spec {
  std::string path; // the spec file
  std::string dir;  // its directory; model paths are relative to it
  int version = 1;
  std::string reference; // resolved path
  SrcLoc referenceLoc;
  int worldSize = 0;
  std::vector<std::string> rankPaths; // resolved, one per rank
  SrcLoc ranksLoc;
  std::vector<SymbolSpec> symbols;
  std::vector<Constraint> constraints;
  std::vector<std::pair<std::string, Placement>> inputs;
  std::vector<std::pair<std::string, Placement>> outputs;
  /// Checkpoints: claims about intermediate reference tensors, proven where
  /// the tensor is computed and then used in place of its inferred relation.
  std::vector<std::pair<std::string, Placement>> layers;

  /// `grads: like_params`: an output `grad:<p>` with no placement of its own
  /// is placed like input `<p>` (a training step's gradients sit where their
  /// parameters do).
  bool gradsLikeParams = false;
  SrcLoc gradsLoc;

  SymbolTable symbolTable() const;
  /// The placement of output `name`: its own, else (with `grads: like_params`)
  /// its parameter's; an error for a parameter placed by a relation expression.
  llvm::Expected<std::optional<Placement>> outputPlacement(const std::string &name) const;
  /// Name of `refName` on rank r (applies `as:` and "{r}").
  static std::string rankName(const std::string &refName, const Placement &p, int r);
};

/// Parses and validates a spec file. Errors carry file:line:col.
llvm::Expected<Spec> loadSpec(const std::string &path);
/// Same from text (tests); `path` is used for messages and relative paths.
llvm::Expected<Spec> parseSpec(const std::string &text, const std::string &path);

/// Parses an integer expression: numbers, symbols, + - * // %, unary -, parens,
/// ceildiv(a,b), min(a,b), max(a,b). `loc` is where the text starts (for errors).
llvm::Expected<smt::Expr> parseIntExpr(const std::string &text, const SymbolTable &syms,
                                       const SrcLoc &loc = {});
/// Parses a boolean constraint: comparisons (== != < <= > >=) of integer
/// expressions joined by `and`/`&&`, `or`/`||`, `not`/`!`.
llvm::Expected<smt::Expr> parseConstraint(const std::string &text, const SymbolTable &syms,
                                          const SrcLoc &loc = {});
/// Parses a relation expression; `worldSize` expands `NAME@*`.
llvm::Expected<RelExpr> parseRelation(const std::string &text, int worldSize,
                                      const SymbolTable &syms, const SrcLoc &loc = {});

} // namespace shardproof::spec
