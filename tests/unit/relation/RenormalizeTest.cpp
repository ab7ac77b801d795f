// Normalizing only what changed (Prover::applyNormalized, reduceNormalized,
// expandClassInNormal) must give the terms a full normalization gives: a
// condition lifted over an operand still prunes that operand's branches when
// the two can constrain each other (the same index, linked sizes), and an
// unfolding step that renormalizes only the subterms reading the expanded
// class gives the term a fresh normalization of the whole gives.
#include "Prover.h"

#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::ir;
using namespace shardproof::relation;
using smt::Expr;

namespace {

struct Renormalize : ::testing::Test {
  smt::Solver solver;
  ClassTable t;
  Prover p{solver, t};
  Expr s = Expr::intVar("s");
  Expr i0 = Expr::intVar("i!0"), i1 = Expr::intVar("i!1");

  static ir::Shape vec(Expr n) {
    ir::Shape sh;
    sh.dims.push_back(std::move(n));
    return sh;
  }
  ClassId leaf(const std::string &name, Expr n = Expr::intConst(8)) {
    ClassInfo ci;
    ci.label = name;
    ci.shape = vec(std::move(n));
    return t.add(ci);
  }
  // The class whose element u!0 is `def`.
  ClassId computed(const std::string &name, Term def, Expr n = Expr::intConst(8)) {
    ClassInfo ci;
    ci.kind = ClassInfo::Compute;
    ci.label = name;
    ci.shape = vec(std::move(n));
    ci.def = std::move(def);
    bool created;
    return t.intern(ci, created);
  }
  Term at(ClassId c, const Expr &i) { return mkRead(c, {i}); }
  Expr range(const Expr &i, const Expr &n) { return Expr::intConst(0) <= i && i < n; }
};

TEST_F(Renormalize, TheSameIndexOnBothOperandsKeepsTwoBranchesNotFour) {
  // (i < 4 ? a : b) * (i < 4 ? c : d): under i < 4 the second operand is c.
  ClassId a = leaf("a"), b = leaf("b"), c = leaf("c"), d = leaf("d");
  Prover::Scope sc(p, range(i0, Expr::intConst(8)));
  Expr lt = i0 < Expr::intConst(4);
  Term x = mkSelect(lt, at(a, i0), at(b, i0));
  Term y = mkSelect(lt, at(c, i0), at(d, i0));
  Term n = p.normalize(mkMul({x, y}), 0);
  Term want = mkSelect(lt, mkMul({at(a, i0), at(c, i0)}), mkMul({at(b, i0), at(d, i0)}));
  EXPECT_TRUE(sameTerm(n, want)) << str(n, [&](unsigned k) { return t[k].label; });
}

TEST_F(Renormalize, AConditionOnSizesLinkedToTheLiftedOneIsStillResolved) {
  // With 0 <= i!0 < s, the branch 4 <= i!0 implies s > 4: the second
  // operand's size condition resolves there, though it reads i!1 only.
  ClassId a = leaf("a", s), b = leaf("b", s), c = leaf("c", s), d = leaf("d", s);
  Prover::Scope sc(p, range(i0, s) && range(i1, s));
  Expr lt = i0 < Expr::intConst(4), big = s > Expr::intConst(4);
  Term x = mkSelect(lt, at(a, i0), at(b, i0));
  Term y = mkSelect(big, at(c, i1), at(d, i1));
  Term n = p.normalize(mkMul({x, y}), 0);
  Term want = mkSelect(lt, mkSelect(big, mkMul({at(a, i0), at(c, i1)}), mkMul({at(a, i0), at(d, i1)})),
                       mkMul({at(b, i0), at(c, i1)}));
  EXPECT_TRUE(sameTerm(n, want)) << str(n, [&](unsigned k) { return t[k].label; });
}

TEST_F(Renormalize, IndependentOperandsGiveEveryPairOfBranches) {
  // A sequence shard's bound (i!0) and a weight shard's (i!1): four leaves.
  ClassId a = leaf("a"), b = leaf("b"), c = leaf("c"), d = leaf("d");
  Prover::Scope sc(p, range(i0, Expr::intConst(8)) && range(i1, Expr::intConst(8)));
  Expr c0 = i0 < Expr::intConst(4), c1 = i1 < Expr::intConst(2);
  Term x = mkSelect(c0, at(a, i0), at(b, i0));
  Term y = mkSelect(c1, at(c, i1), at(d, i1));
  Term n = p.normalize(mkMul({x, y}), 0);
  auto prod = [&](ClassId l, ClassId r) { return mkMul({at(l, i0), at(r, i1)}); };
  Term want = mkSelect(c0, mkSelect(c1, prod(a, c), prod(a, d)), mkSelect(c1, prod(b, c), prod(b, d)));
  EXPECT_TRUE(sameTerm(n, want)) << str(n, [&](unsigned k) { return t[k].label; });
}

TEST_F(Renormalize, AnUnfoldingStepGivesWhatAFullNormalizationGives) {
  // h = (u < s/2 ? x : y) read inside a sum beside an untouched class g:
  // expanding h renormalizes the sum's body only, and must agree with
  // normalizing the whole expanded term afresh.
  Expr half = smt::floorDiv(s, Expr::intConst(2));
  ClassId x = leaf("x", s), y = leaf("y", s), w = leaf("w", s), z = leaf("z", s);
  Expr u = Expr::intVar("u!0");
  ClassId h = computed("h", mkSelect(u < half, at(x, u), at(y, u - half)), s);
  ClassId g = computed("g", mkMul({at(z, u), at(z, u)}), s);
  Prover::Scope sc(p, range(i0, s));
  Expr k = boundVar(0);
  Term body = mkMul({at(w, k), at(h, k)});
  Term t0 = p.normalize(mkAdd({at(g, i0), mkSum(0, Expr::intConst(0), s, body)}), 0);
  Term full = p.expandClass(t0, h, 0);
  Term incremental = p.expandClassInNormal(t0, h, 0);
  auto name = [&](unsigned c) { return t[c].label; };
  EXPECT_TRUE(sameTerm(full, incremental)) << str(full, name) << "\n" << str(incremental, name);
  // g was not expanded: it is still read.
  EXPECT_NE(str(incremental, name).find("g["), std::string::npos) << str(incremental, name);
}

} // namespace
