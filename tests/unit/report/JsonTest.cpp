// The JSON report is written as a stream (a DOM of a 126-layer model's 21,508
// rows cost 0.3 s and 130 MB). Its text must stay what an llvm::json value of
// the same report prints: keys sorted, two-space indent, strings escaped.
#include "shardproof/report/Report.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::report;
using relation::RelationRow;

namespace {

relation::Result awkwardResult() {
  relation::Result r;
  r.verdict = relation::Verdict::Refuted;
  r.reason = "output 'y' differs";
  const char *names[] = {"x", "/blocks.0/attn/\"quoted\"\\path", "tab\there\x01 del\x7f", "caf\xc3\xa9"};
  RelationRow::Status statuses[] = {RelationRow::Input, RelationRow::Matched, RelationRow::View,
                                    RelationRow::Unmatched};
  for (int i = 0; i < 4; ++i) {
    RelationRow row;
    row.tensor = names[i];
    row.node = std::string("/n") + std::to_string(i);
    row.op = i ? "MatMul" : "";
    row.module = i ? "blocks.0" : "";
    row.relation = i == 3 ? "sum(k!0 in [0, seq): x@0[i!0, k!0])" : "concat(h@0, h@1, axis=1)";
    row.status = statuses[i];
    r.rows.push_back(row);
  }
  relation::OutputResult out;
  out.tensor = "y";
  out.verdict = relation::Verdict::Refuted;
  out.detail = "differs at y[0, 1]";
  r.outputs.push_back(out);
  relation::Failure f;
  f.kind = relation::Failure::NoRelation;
  f.message = "no rank tensor computes 'h'";
  f.refNode = "/n1";
  f.refOp = "MatMul";
  f.module = "blocks.0";
  f.tensor = "h";
  f.rankNodes = {"rank 0: /mm (MatMul)"};
  relation::Counterexample cex;
  cex.sizes = {{"seq", 2}};
  cex.tensor = "h";
  cex.index = {0, 1};
  cex.expected = "x@0[0, 1]";
  cex.actual = "0";
  f.cex = cex;
  r.failures.push_back(f);
  r.notes.push_back("a note");
  r.stats.refNodes = 4;
  r.stats.probes = 3;
  return r;
}

} // namespace

TEST(JsonReport, StreamedTextIsWhatTheSameValuePrints) {
  Context ctx;
  ctx.specPath = "spec.yaml";
  ctx.reference = "ref.onnx";
  ctx.rankPaths = {"r0.onnx", "r1.onnx"};
  std::string text = toJson(awkwardResult(), ctx);
  auto parsed = llvm::json::parse(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError()) << "\n" << text;
  // Printed from a DOM, an object's keys come out sorted: the stream must
  // have written them in that order, with the same indent and escapes.
  EXPECT_EQ(text, llvm::formatv("{0:2}", *parsed).str() + "\n");
  const llvm::json::Object *top = parsed->getAsObject();
  ASSERT_TRUE(top);
  const llvm::json::Array *rows = top->getArray("relations");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 4u);
  auto field = [&](size_t i, llvm::StringRef key) {
    return (*rows)[i].getAsObject()->getString(key).value_or("(missing)").str();
  };
  EXPECT_EQ(field(1, "tensor"), "/blocks.0/attn/\"quoted\"\\path");
  EXPECT_EQ(field(2, "tensor"), "tab\there\x01 del\x7f");
  EXPECT_EQ(field(3, "status"), "unmatched");
  EXPECT_EQ(top->getObject("stats")->getInteger("numeric_probes").value_or(-1), 3);
}
