// The smt layer: constant folding, inspection, and the solver's three-way answers.
#include "shardproof/smt/Solver.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>

using namespace shardproof::smt;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDPROOF_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SHARDPROOF_ASAN 1
#endif
#ifdef SHARDPROOF_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace {
// Under ASan, what is allocated while one of these lives is not reported as leaked.
struct LeakCheckPause {
#ifdef SHARDPROOF_ASAN
  LeakCheckPause() { __lsan_disable(); }
  ~LeakCheckPause() { __lsan_enable(); }
#endif
};
} // namespace

TEST(SmtExpr, ConcreteShapeArithmeticNeverReachesTheSolver) {
  Expr e = floorDiv(Expr::intConst(17) + Expr::intConst(3), Expr::intConst(4));
  ASSERT_TRUE(e.asInt());
  EXPECT_EQ(*e.asInt(), 5);
  EXPECT_EQ(*mod(Expr::intConst(-7), Expr::intConst(4)).asInt(), 1) << "floor modulo, like Python";
  EXPECT_EQ(*floorDiv(Expr::intConst(-7), Expr::intConst(4)).asInt(), -2);
  EXPECT_EQ(*ceilDiv(Expr::intConst(50257), Expr::intConst(2)).asInt(), 25129);
}

TEST(SmtExpr, DivisionByZeroIsInvalidAndPropagates) {
  Expr bad = floorDiv(Expr::intVar("n"), Expr::intConst(0));
  EXPECT_FALSE(bad.isValid());
  EXPECT_FALSE((bad + Expr::intConst(1)).isValid());
  Solver s;
  EXPECT_EQ(s.check("invalid", bad == Expr::intConst(0)).result, Result::Error);
  EXPECT_FALSE(s.prove("invalid", bad == bad).proved()) << "an invalid goal is never proved";
}

TEST(SmtExpr, AffineDecompositionFindsTheCoefficient) {
  Expr i = Expr::intVar("i"), n = Expr::intVar("n");
  auto a = (i * 1 + n - Expr::intConst(3)).affineIn("i");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, 1);
  EXPECT_FALSE(a->second.mentions("i"));
  auto b = (n - i).affineIn("i");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->first, -1);
  EXPECT_FALSE((i * n).affineIn("i")) << "a symbolic coefficient is not affine";
}

TEST(SmtExpr, PrintsInfixForReports) {
  Expr seq = Expr::intVar("seq");
  EXPECT_EQ((floorDiv(seq, Expr::intConst(2)) + 1).str(), "seq // 2 + 1");
  EXPECT_EQ((seq - Expr::intVar("k")).simplify().str().find("-") != std::string::npos, true);
}

// `s + -1*s` prints as `s - s`, which reads back as 0 (a - a folds): unless
// the sum folds too, a relation's rendering reads back as another (the
// relation fuzzer's finding).
TEST(SmtExpr, APlusMinusOneTimesItselfIsZeroAsAMinusItselfIs) {
  Expr s = Expr::intVar("s"), m = Expr::intVar("m");
  Expr minusS = Expr::intConst(-1) * s;
  EXPECT_EQ((s + minusS).asInt(), 0);
  EXPECT_EQ((minusS + s).asInt(), 0);
  EXPECT_EQ((s - s).asInt(), 0);
  EXPECT_EQ((s + minusS - m).str(), (s - s - m).str());
  EXPECT_EQ((s + Expr::intConst(-2) * s).str(), "s - 2*s") << "only -1 prints as a plain minus";
}

TEST(SmtExpr, AFactorThatIsAQuotientKeepsItsParentheses) {
  Expr seq = Expr::intVar("seq"), q = Expr::intVar("q");
  Expr two = Expr::intConst(2), three = Expr::intConst(3);
  // Printed without them, 2*((3*seq) // q) would read as (2*3*seq) // q.
  EXPECT_EQ((two * floorDiv(three * seq, q)).str(), "2*(3*seq // q)");
  EXPECT_EQ((two * (two * seq)).str(), "2*(2*seq)");
  EXPECT_EQ((two * seq * q).str(), "2*seq*q");
  EXPECT_EQ((two * (seq * q)).str(), "2*seq*q") << "a product reads back as the same value";
  // A product that starts with a quotient: printed `2*3*seq // q*seq`, it
  // read back as ((6*seq) // q)*seq, another value (found by the fuzzer).
  EXPECT_EQ((two * (floorDiv(three * seq, q) * seq)).str(), "2*(3*seq // q*seq)");
}

TEST(SmtExpr, MinAndMaxPrintAsWrittenNotAsTheirIte) {
  Expr s = Expr::intVar("s"), q = Expr::intVar("q"), two = Expr::intConst(2);
  EXPECT_EQ(min(s, q).str(), "min(s, q)");
  EXPECT_EQ(max(max(s, q), two).str(), "max(max(s, q), 2)");
  // Each min repeats both operands in its ite: 40 nested ones printed as
  // ites would be 2^40 long.
  Expr m = s;
  for (int i = 0; i < 40; ++i)
    m = min(m, q + i);
  EXPECT_LT(m.str().size(), 2000u);
}

TEST(SmtSolver, ProvesUnderAssumptionsAndRefutesWithAModel) {
  Solver s;
  Expr n = Expr::intVar("n");
  s.assume(n >= Expr::intConst(1));
  s.assume(mod(n, Expr::intConst(4)) == Expr::intConst(0));
  EXPECT_TRUE(s.prove("even-split", mod(n, Expr::intConst(2)) == Expr::intConst(0)).proved());
  Proof p = s.prove("not-eight", mod(n, Expr::intConst(8)) == Expr::intConst(0));
  ASSERT_EQ(p.status, Proof::Refuted);
  auto v = p.counterexample.get("n");
  ASSERT_TRUE(v);
  EXPECT_NE(*v % 8, 0);
  EXPECT_EQ(*v % 4, 0);
}

TEST(SmtSolver, ShrinkFindsTheSmallestBreakingSize) {
  Solver s;
  Expr n = Expr::intVar("vocab");
  s.assume(n >= Expr::intConst(1));
  Expr bad = mod(n, Expr::intConst(2)) != Expr::intConst(0) && n >= Expr::intConst(100);
  CheckResult r = s.check("find", bad);
  ASSERT_EQ(r.result, Result::Sat);
  Model m = s.shrink("find", bad, r.model, {"vocab"});
  EXPECT_EQ(m.get("vocab").value_or(-1), 101);
}

TEST(SmtSolver, CountsQueriesByNameAndDumpsSmtLib) {
  Solver s;
  auto dir = std::filesystem::temp_directory_path() / ("shardproof-smt-dump-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  s.setDumpDir(dir.string());
  Expr x = Expr::intVar("x");
  s.prove("bounds", x * x >= Expr::intConst(0));
  s.prove("bounds", Expr::boolConst(true)); // trivial: no solver call, no dump
  EXPECT_EQ(s.stats().at("bounds").unsat, 1u);
  EXPECT_EQ(s.stats().at("bounds").trivial, 1u);
  unsigned files = 0;
  for (auto &e : std::filesystem::directory_iterator(dir))
    files += e.path().extension() == ".smt2";
  EXPECT_EQ(files, 1u);
  std::filesystem::remove_all(dir);
}

TEST(SmtSolver, TimeoutIsUnknownNeverProved) {
  Solver s(1); // 1 ms: a nonlinear query that cannot finish
  Expr a = Expr::intVar("a"), b = Expr::intVar("b"), c = Expr::intVar("c");
  Expr hard = a * a * a + b * b * b == c * c * c && a > Expr::intConst(0) && b > Expr::intConst(0) &&
              c > Expr::intConst(0);
  Proof p = s.prove("fermat", !hard);
  EXPECT_NE(p.status, Proof::Proved);
}

namespace {
// a^3 + b^3 = c^3 over positive integers: nonlinear, beyond Z3 in any short time.
Expr fermat() {
  Expr a = Expr::intVar("a"), b = Expr::intVar("b"), c = Expr::intVar("c");
  return a * a * a + b * b * b == c * c * c && a > Expr::intConst(0) && b > Expr::intConst(0) &&
         c > Expr::intConst(0);
}
} // namespace

TEST(SmtSolver, HardQueryWithATinyTimeoutIsUnknownSayingSo) {
  Solver s(20);
  Proof p = s.prove("fermat", !fermat());
  ASSERT_EQ(p.status, Proof::Unknown);
  EXPECT_NE(p.reason.find("solver timeout after 20 ms"), std::string::npos) << p.reason;
  EXPECT_EQ(s.stats().at("fermat").unknown, 1u);
}

TEST(SmtSolver, SpentTimeBudgetAnswersUnknownAtOnceNamingIt) {
  Solver s(60000);
  s.setDeadline(std::chrono::steady_clock::now() - std::chrono::seconds(1), "time budget of 5 s");
  EXPECT_TRUE(s.pastDeadline());
  auto t0 = std::chrono::steady_clock::now();
  Proof p = s.prove("fermat", !fermat());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ASSERT_EQ(p.status, Proof::Unknown);
  EXPECT_EQ(p.reason, "time budget of 5 s exhausted");
  EXPECT_EQ(s.firstCutQuery(), "fermat");
  // Constant-folded goals need no solver and stay proved.
  EXPECT_TRUE(s.prove("trivial", Expr::boolConst(true)).proved());
}

TEST(SmtSolver, BudgetShorterThanTheTimeoutCutsTheQueryAndIsNamed) {
  Solver s(60000);
  s.setDeadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(50), "time budget of 0.05 s");
  Proof p = s.prove("fermat", !fermat());
  ASSERT_EQ(p.status, Proof::Unknown);
  EXPECT_EQ(p.reason, "time budget of 0.05 s exhausted");
}

TEST(SmtSolver, MemoryLimitIsUnknownNeverProvedNorACrash) {
  Solver s(20000);
  Solver::setMemoryLimitMb(1);
  Proof p;
  {
    // Z3 abandons what it allocated when it hits memory_max_size (every frame
    // of LeakSanitizer's report is inside libz3); ignore only this query's.
    [[maybe_unused]] LeakCheckPause pause;
    p = s.prove("fermat", !fermat());
  }
  Solver::setMemoryLimitMb(0);
  ASSERT_EQ(p.status, Proof::Unknown);
  EXPECT_NE(p.reason.find("memory limit of 1 MB"), std::string::npos) << p.reason;
  // Afterwards the solver works again.
  Expr x = Expr::intVar("x");
  EXPECT_TRUE(s.prove("square", x * x >= Expr::intConst(0)).proved());
}

TEST(SmtExpr, ConstantFoldingNeverWrapsAroundInt64) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  Expr big = Expr::intConst(max) + Expr::intConst(1);
  EXPECT_FALSE(big.asInt()) << "2^63 is no int64; folding it would wrap to -2^63";
  Solver s;
  EXPECT_TRUE(s.prove("no-wrap", big > Expr::intConst(0)).proved());
  EXPECT_TRUE(s.prove("no-wrap", Expr::intConst(int64_t(1) << 62) * Expr::intConst(4) > Expr::intConst(0)).proved());
  EXPECT_TRUE(s.prove("no-wrap", Expr::intConst(-max) - Expr::intConst(2) < Expr::intConst(0)).proved());
  Expr n = Expr::intVar("n");
  EXPECT_TRUE(s.prove("no-wrap", (n + Expr::intConst(max) + Expr::intConst(max)).simplify() ==
                                     n + Expr::intConst(max) + Expr::intConst(max))
                  .proved());
}

// ONNX's integer Div truncates, Mod (fmod=0) has the divisor's sign, fmod=1 the
// dividend's. Z3's div/mod are Euclidean, so the symbolic forms spell the signs
// out: each must agree with C++ (truncating) and Python (floor) arithmetic for
// every sign of both operands, folded on numerals and evaluated on a symbol.
TEST(IntegerDivision, TruncDivTruncModAndFloorModAgreeWithTheirDefinitionsForEverySign) {
  Expr a = Expr::intVar("a"), b = Expr::intVar("b");
  Expr q = truncDiv(a, b), r = truncMod(a, b), m = floorModSigned(a, b);
  for (int64_t x = -7; x <= 7; ++x)
    for (int64_t y : {-3, -2, -1, 1, 2, 3}) {
      int64_t pyMod = x % y != 0 && ((x % y < 0) != (y < 0)) ? x % y + y : x % y;
      Expr::Env env = [&](const std::string &n) -> std::optional<int64_t> { return n == "a" ? x : y; };
      EXPECT_EQ(q.eval(env), x / y) << x << " / " << y;
      EXPECT_EQ(r.eval(env), x % y) << x << " fmod " << y;
      EXPECT_EQ(m.eval(env), pyMod) << x << " % " << y;
      EXPECT_EQ(truncDiv(Expr::intConst(x), Expr::intConst(y)).asInt(), x / y);
      EXPECT_EQ(truncMod(Expr::intConst(x), Expr::intConst(y)).asInt(), x % y);
      EXPECT_EQ(floorModSigned(Expr::intConst(x), Expr::intConst(y)).asInt(), pyMod);
      // A constant divisor of either sign, symbolic dividend.
      EXPECT_EQ(truncDiv(a, Expr::intConst(y)).eval(env), x / y);
      EXPECT_EQ(floorModSigned(a, Expr::intConst(y)).eval(env), pyMod);
      if (x >= 0) { // the plain (Euclidean) form, for a dividend known >= 0
        EXPECT_EQ(truncDiv(a, b, true).eval(env), x / y);
        EXPECT_EQ(truncMod(a, b, true).eval(env), x % y);
      }
    }
  EXPECT_FALSE(truncDiv(a, Expr::intConst(0)).isValid()); // division by zero: no value
  EXPECT_FALSE(floorModSigned(a, Expr::intConst(0)).isValid());
}

// A replay evaluates index expressions by variable slot instead of by name: the
// same value as eval() wherever the variables are set, nothing where one is
// not (a wrong number would make a replay disagree with itself), and 0 for it
// only when asked (a select's condition over an index the point does not fix).
TEST(SmtExpr, EvaluationBySlotAgreesWithEvaluationByName) {
  Expr i = Expr::intVar("i!0"), seq = Expr::intVar("seq");
  Expr e = ite(i < floorDiv(seq, Expr::intConst(2)), i * 2, mod(i, Expr::intConst(3)) + seq);
  ASSERT_EQ(Expr::slotOf("seq"), Expr::slotOf("seq")) << "one slot per name";
  ASSERT_NE(Expr::slotOf("seq"), Expr::slotOf("i!0"));
  Expr::Slots slots;
  auto set = [&](const std::string &n, int64_t v) {
    uint32_t s = Expr::slotOf(n);
    if (s >= slots.size())
      slots.resize(s + 1, Expr::kUnset);
    slots[s] = v;
  };
  set("seq", 10);
  for (int64_t x = 0; x < 10; ++x) {
    set("i!0", x);
    Expr::Env env = [&](const std::string &n) -> std::optional<int64_t> { return n == "seq" ? 10 : x; };
    EXPECT_EQ(e.evalSlots(slots), e.eval(env)) << "i = " << x;
    ASSERT_TRUE(e.evalSlots(slots));
  }
  slots[Expr::slotOf("i!0")] = Expr::kUnset;
  EXPECT_FALSE(e.evalSlots(slots)) << "an unset variable has no value";
  EXPECT_EQ(e.evalSlots(slots, nullptr, /*unknownAsZero=*/true), 0) << "i read as 0: 0 < 5, so 0 * 2";
  EXPECT_FALSE(Expr::intVar("never_set_anywhere").evalSlots(slots)) << "a slot past the end is unset";
}

// Whether an index expression reads a variable, asked of every class
// definition per axis in the world build: by name, through applications and
// shared subterms, and never confused by a function or a longer name.
TEST(SmtExpr, MentionsFindsAVariableByItsNameOnly) {
  Expr u0 = Expr::intVar("u!0"), u1 = Expr::intVar("u!1"), u10 = Expr::intVar("u!10");
  Expr shared = u0 * Expr::intConst(3) + u10;
  Expr e = ite(shared >= Expr::intConst(2), shared, shared + Expr::intConst(1));
  EXPECT_TRUE(Expr::app("f", {u1}).mentions("u!1"));
  EXPECT_FALSE(Expr::app("u!0", {u1}).mentions("u!0")); // a function of that name is not the variable
  EXPECT_TRUE(e.mentions("u!0"));
  EXPECT_TRUE(e.mentions("u!10"));
  EXPECT_FALSE(e.mentions("u!1"));
  EXPECT_FALSE(e.mentions("u"));
  EXPECT_TRUE((u1 >= Expr::intConst(0)).mentions("u!1"));
  EXPECT_FALSE(Expr::intConst(4).mentions("u!0"));
  EXPECT_FALSE(Expr().mentions("u!0"));
}

TEST(SmtExpr, AnIndexOfADataReadIsToldFromAnIndexBesideIt) {
  // projectIndices may set i to 0 in `i + ids(j) >= 5`, never j: that would
  // read another element.
  Expr i = Expr::intVar("i"), j = Expr::intVar("j");
  Expr read = Expr::app("ids", {j});
  EXPECT_TRUE((read >= Expr::intConst(5)).mentionsInApplication("j"));
  EXPECT_FALSE((i + read >= Expr::intConst(5)).mentionsInApplication("i"));
  EXPECT_TRUE((Expr::app("ids", {Expr::app("ids", {i})}) >= Expr::intConst(0)).mentionsInApplication("i"));
  EXPECT_FALSE((i >= Expr::intConst(0)).mentionsInApplication("i"));
}
