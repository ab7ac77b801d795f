// The --html page without a browser: hostile names stay text, repeated
// layers are folded, the failing module is marked, collectives are matched
// across ranks. tests/html/test_html.py loads real pages in Chromium.
#include "shardproof/report/Report.h"
#include "src/report/HtmlModel.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::report;
using relation::Failure;
using relation::RelationRow;

namespace {

RelationRow row(std::string module, std::string tensor, std::string op, std::string relation,
                RelationRow::Status s = RelationRow::Matched) {
  RelationRow r;
  r.module = std::move(module);
  r.tensor = std::move(tensor);
  r.node = r.tensor.empty() ? "" : "/" + r.tensor;
  r.op = std::move(op);
  r.relation = std::move(relation);
  r.status = s;
  return r;
}

// Layer k of a 4-layer stack: its input is layer k-1's output.
std::vector<RelationRow> layer(int k, RelationRow::Status last = RelationRow::Matched) {
  std::string l = "layers." + std::to_string(k), prev = "/layers." + std::to_string(k - 1) + "/Add_output_0";
  return {row(l + ".mlp.fc1", "/" + l + "/mlp/fc1/MatMul_output_0", "MatMul",
              "concat(/" + l + "/mlp/fc1/MatMul_output_0@0, /" + l + "/mlp/fc1/MatMul_output_0@1, axis=2)"),
          row(l, "/" + l + "/Add_output_0", "Add", k == 0 ? "x@*" : prev + "@*", last)};
}

Failure failure(Failure::Kind kind, std::string message, std::string module, std::string tensor) {
  Failure f{};
  f.kind = kind;
  f.message = std::move(message);
  f.module = std::move(module);
  f.tensor = std::move(tensor);
  f.refNode = "/" + f.tensor;
  f.refOp = "Add";
  return f;
}

size_t count(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

Context context() {
  Context c;
  c.specPath = "spec.yaml";
  c.reference = "ref.onnx";
  c.rankPaths = {"r0.onnx", "r1.onnx"};
  return c;
}

} // namespace

TEST(Html, HostileTensorNameCannotInjectMarkup) {
  relation::Result r;
  r.verdict = relation::Verdict::Refuted;
  r.reason = "no rank computes '</script><b>x'";
  r.rows = {row("m", "</script><b>x", "Add", "<img src=x onerror=alert(1)>", RelationRow::Unmatched)};
  r.outputs.push_back({"</script><b>x", "", relation::Verdict::Refuted, "\"quoted\" & <tag>"});
  Failure f = failure(Failure::NoRelation, "tensor '</script><b>x' differs", "m\"><b>", "</script><b>x");
  relation::Counterexample c;
  c.tensor = "</script><b>x";
  c.replayed = true;
  c.expectedValue = 1.5;
  c.actualValue = -2;
  f.cex = c;
  r.failures.push_back(f);
  Context ctx = context();
  ctx.collectives.push_back({0, "</script><svg onload=alert(1)>", "AllReduce", "m"});
  std::string page = toHtml(r, ctx);
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_EQ(page.find("<b>x"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<svg onload"), std::string::npos);
  EXPECT_EQ(page.find("m\"><b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;b&gt;x"), std::string::npos);
  // The data block holds the name with `<` escaped for JSON, and both script
  // elements close exactly where the page closes them.
  EXPECT_NE(page.find("\\u003c/script\\u003e\\u003cb\\u003ex"), std::string::npos);
  EXPECT_EQ(count(page, "<script"), 2u);
  EXPECT_EQ(count(page, "</script>"), 2u);
  EXPECT_NE(page.find("id=\"replay-expected\" data-value=\"1.5\""), std::string::npos);
  EXPECT_NE(page.find("id=\"replay-actual\" data-value=\"-2\""), std::string::npos);
}

TEST(Html, NoNetworkReferences) {
  relation::Result r;
  r.verdict = relation::Verdict::Verified;
  r.rows = layer(0);
  std::string page = toHtml(r, context());
  // The SVG namespace is an identifier, never fetched.
  std::string rest = page;
  for (size_t at; (at = rest.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    rest.erase(at, 34);
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  EXPECT_EQ(rest.find("@import"), std::string::npos);
}

TEST(Html, RelativeLayerNames) {
  EXPECT_EQ(html::relativeToLayer("/layers.3/mlp/fc1/MatMul_output_0@1", "layers", 3),
            "/layers.{0}/mlp/fc1/MatMul_output_0@1");
  EXPECT_EQ(html::relativeToLayer("/layers.2/Add_output_0@*", "layers", 3), "/layers.{-1}/Add_output_0@*");
  EXPECT_EQ(html::relativeToLayer("model.layers.12.mlp.weight", "layers", 12), "model.layers.{0}.mlp.weight");
  // Not a layer: a longer name ending the same, a number that goes on.
  EXPECT_EQ(html::relativeToLayer("sublayers.3/x", "layers", 3), "sublayers.3/x");
  EXPECT_EQ(html::relativeToLayer("layers.3x", "layers", 3), "layers.3x");
  // Top-level layers (nn.Sequential): only a whole path component.
  EXPECT_EQ(html::relativeToLayer("/3/Add_output_0 + 0.5", "", 3), "/{0}/Add_output_0 + 0.5");
  EXPECT_EQ(html::relativeToLayer("/3x/Add", "", 3), "/3x/Add");
}

TEST(Html, IdenticalLayersFoldedFailingLayerShown) {
  relation::Result r;
  r.verdict = relation::Verdict::Refuted;
  r.rows.push_back(row("", "x", "", "x", RelationRow::Input));
  for (int k = 0; k < 4; ++k)
    for (auto &rw : layer(k, k == 3 ? RelationRow::Unmatched : RelationRow::Matched))
      r.rows.push_back(rw);
  r.failures.push_back(failure(Failure::NoRelation, "no rank computes it", "layers.3", "layers.3/Add_output_0"));
  r.failures.back().rankNodes = {"rank 0: /layers.3/Add (Add)"};
  auto tree = html::buildTree(r, {});
  ASSERT_EQ(tree->children.size(), 1u);
  const html::ModNode &stack = *tree->children[0];
  EXPECT_EQ(stack.path, "layers");
  EXPECT_TRUE(stack.leadsToLayers);
  ASSERT_EQ(stack.children.size(), 4u);
  // Layer 0 reads the model input, so layer 1 is the first of its kind.
  EXPECT_EQ(stack.children[0]->sameAs, nullptr);
  EXPECT_EQ(stack.children[1]->sameAs, nullptr);
  ASSERT_NE(stack.children[2]->sameAs, nullptr);
  EXPECT_EQ(stack.children[2]->sameAs->path, "layers.1");
  EXPECT_EQ(stack.children[3]->sameAs, nullptr); // it fails
  EXPECT_TRUE(stack.children[3]->holdsFirstFailure);
  EXPECT_EQ(tree->counts[RelationRow::Matched], 7u);
  EXPECT_EQ(tree->counts[RelationRow::Unmatched], 1u);

  std::string page = toHtml(r, context());
  EXPECT_NE(page.find("data-module=\"layers.2\""), std::string::npos);
  EXPECT_NE(page.find("data-identical-to=\"1\" data-identical-module=\"layers.1\""), std::string::npos);
  EXPECT_NE(page.find("identical to layer 1, proven once"), std::string::npos);
  EXPECT_EQ(count(page, "class=\"mod failing layer\""), 1u);
  EXPECT_NE(page.find("data-first-failure=\"true\" open>"), std::string::npos);
}

TEST(Html, CollectivesMatchedAcrossRanks) {
  Context ctx = context();
  for (int rank = 0; rank < 2; ++rank)
    for (int k = 0; k < 3; ++k) {
      std::string l = "layers." + std::to_string(k);
      ctx.collectives.push_back({rank, "/" + l + "/attn/AllReduce", "AllReduce", l + ".attn"});
      if (rank == 0 || k != 2) // layer 2 lacks rank 1's second all-reduce
        ctx.collectives.push_back({rank, "/" + l + "/mlp/AllReduce", "AllReduce", l + ".mlp"});
    }
  auto groups = html::groupCollectives(ctx);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].unit, "layers.0");
  ASSERT_EQ(groups[0].bars.size(), 2u);
  EXPECT_EQ(groups[0].bars[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1].sameAs, 0);
  EXPECT_EQ(groups[2].sameAs, -1);
  EXPECT_EQ(groups[2].bars[1].ranks, (std::vector<int>{0}));
  relation::Result r;
  std::string page = toHtml(r, ctx);
  EXPECT_EQ(count(page, "<g class=\"collective"), 6u);
  EXPECT_EQ(count(page, "<circle class=\"site\""), 11u);
  EXPECT_EQ(count(page, "<circle class=\"absent\""), 1u);
  EXPECT_NE(page.find("<b id=\"count-collective-sites\">11</b>"), std::string::npos);
}
