// The relation file format without the binary: what is recorded, how awkward
// names are written so that they read back unchanged, and how a diff is keyed.
#include "shardproof/report/RelationFile.h"

#include <gtest/gtest.h>

using namespace shardproof;
using namespace shardproof::report;
using relation::RelationRow;

namespace {

relation::Result resultWith(std::vector<RelationRow> rows) {
  relation::Result r;
  r.verdict = relation::Verdict::Verified;
  r.rows = std::move(rows);
  return r;
}

RelationRow row(std::string tensor, std::string op, std::string relation,
                RelationRow::Status s = RelationRow::Matched, std::string module = "m") {
  RelationRow r;
  r.tensor = std::move(tensor);
  r.node = "/n";
  r.op = std::move(op);
  r.module = std::move(module);
  r.relation = std::move(relation);
  r.status = s;
  return r;
}

const Context kCtx{"/home/someone/specs/model_tp2.yaml", "/home/someone/specs/model_ref.onnx", {"a", "b"}};

} // namespace

TEST(RelationFileFormat, RecordsEveryRowButConstantsInGraphOrder) {
  auto r = resultWith({row("x", "", "x", RelationRow::Input, ""), row("c", "Constant", "0.5", RelationRow::View),
                       row("h", "MatMul", "concat(h@0, h@1, axis=1)"),
                       row("v", "Reshape", "h@0[i!0]", RelationRow::View),
                       row("u", "Foo", "unsupported op Foo", RelationRow::Unsupported)});
  auto e = recordedEntries(r);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].tensor, "x");
  EXPECT_EQ(e[0].status, "input");
  EXPECT_EQ(e[0].op, ""); // an input has no op
  EXPECT_EQ(e[1].tensor, "h");
  EXPECT_EQ(e[2].status, "view");
  EXPECT_EQ(e[3].status, "unsupported");
}

TEST(RelationFileFormat, HeaderNamesFilesNotPaths) {
  std::string text = writeRelationFile(resultWith({row("h", "MatMul", "h@*")}), kCtx);
  EXPECT_EQ(text.rfind("# shardproof relations: reference model_ref.onnx, 2 ranks (model_tp2.yaml)\n", 0), 0u) << text;
  EXPECT_EQ(text.find("/home/someone"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  - {tensor: h, module: m, op: MatMul, status: matched, relation: \"h@*\"}\n"),
            std::string::npos)
      << text;
}

TEST(RelationFileFormat, AwkwardNamesReadBackUnchanged) {
  std::vector<RelationRow> rows;
  for (const char *name : {"onnx::Mul_3", "y", "null", "True", "#hash", "-dash", "a, b", "say \"hi\"",
                           "back\\slash", "tab\there", "{brace}", "123", "/ok/name_0", "caf\xc3\xa9"})
    rows.push_back(row(name, "Op", std::string("f(") + name + ")", RelationRow::Matched, name));
  auto r = resultWith(rows);
  std::string text = writeRelationFile(r, kCtx);
  auto parsed = parseRelationFile(text, "r.yaml");
  ASSERT_TRUE(static_cast<bool>(parsed)) << shardproof::toString(parsed.takeError()) << "\n" << text;
  auto want = recordedEntries(r);
  ASSERT_EQ(parsed->entries.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(parsed->entries[i].tensor, want[i].tensor);
    EXPECT_EQ(parsed->entries[i].module, want[i].module);
    EXPECT_EQ(parsed->entries[i].relation, want[i].relation);
  }
  EXPECT_EQ(parsed->verdict, "VERIFIED");
  EXPECT_TRUE(diffRelations(*parsed, r).empty());
}

TEST(RelationFileFormat, EmptyResultIsAnEmptyList) {
  std::string text = writeRelationFile(resultWith({}), kCtx);
  EXPECT_NE(text.find("relations: []\n"), std::string::npos) << text;
  auto parsed = parseRelationFile(text, "r.yaml");
  ASSERT_TRUE(static_cast<bool>(parsed)) << shardproof::toString(parsed.takeError());
  EXPECT_TRUE(parsed->entries.empty());
}

TEST(RelationFileFormat, DiffComparesStatusAndRelationByTensor) {
  auto before = resultWith({row("a", "MatMul", "a@*"), row("b", "Add", "b@*"), row("c", "Mul", "c@*"),
                            row("gone", "Relu", "g@*")});
  auto parsed = parseRelationFile(writeRelationFile(before, kCtx), "r.yaml");
  ASSERT_TRUE(static_cast<bool>(parsed)) << shardproof::toString(parsed.takeError());

  // c's relation changes, b's status changes, a only changes module and op
  // (not compared), gone disappears and new appears.
  auto after = resultWith({row("new", "Exp", "n@*"), row("a", "Gemm", "a@*", RelationRow::Matched, "other"),
                           row("b", "Add", "b@*", RelationRow::Unmatched), row("c", "Mul", "sum(c@0, c@1)")});
  RelationDiff d = diffRelations(*parsed, after);
  ASSERT_EQ(d.changed.size(), 2u);
  EXPECT_EQ(d.changed[0].current.tensor, "b"); // graph order of the current check
  EXPECT_EQ(d.changed[0].recorded.status, "matched");
  EXPECT_EQ(d.changed[0].current.status, "unmatched");
  EXPECT_EQ(d.changed[1].recorded.relation, "c@*");
  EXPECT_EQ(d.changed[1].current.relation, "sum(c@0, c@1)");
  EXPECT_EQ(d.changed[1].recorded.loc.line, 10); // 7 header lines, then a, b, c
  ASSERT_EQ(d.added.size(), 1u);
  EXPECT_EQ(d.added[0].tensor, "new");
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].tensor, "gone");
  EXPECT_EQ(exitCode(relation::Verdict::Verified, d), kExitRelationsChanged);
  EXPECT_EQ(exitCode(relation::Verdict::Refuted, d), 1);
  EXPECT_EQ(exitCode(relation::Verdict::Verified, RelationDiff{}), 0);
}

TEST(RelationFileFormat, ErrorsCarryLineAndColumn) {
  auto bad = parseRelationFile("shardproof_relations: 1\nverdict: VERIFIED\nrelations:\n  - {tensor: x}\n", "r.yaml");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(shardproof::toString(bad.takeError()),
            "r.yaml:4:5: error: relation entry is missing required key 'status'");
  auto notList = parseRelationFile("shardproof_relations: 1\nrelations: {a: 1}\n", "r.yaml");
  ASSERT_FALSE(static_cast<bool>(notList));
  EXPECT_EQ(shardproof::toString(notList.takeError()), "r.yaml:2:12: error: 'relations' must be a list, got a map");
  auto dupKey = parseRelationFile("shardproof_relations: 1\nrelations: []\nrelations: []\n", "r.yaml");
  ASSERT_FALSE(static_cast<bool>(dupKey));
  EXPECT_EQ(shardproof::toString(dupKey.takeError()),
            "r.yaml:3:1: error: duplicate key 'relations' in the relations file (first given at line 2)");
}
