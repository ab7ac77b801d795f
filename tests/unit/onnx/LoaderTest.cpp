// The ONNX loader on models built in memory: every storage form of tensor data,
// symbolic dims, node order, and each kind of malformed file getting a user
// error that names the file and the offending tensor or node.
#include "shardproof/onnx/Loader.h"
#include "shardproof/ir/Ops.h"

#include "tests/unit/OnnxBuilder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace shardproof;

namespace {

struct ModelBuilder : shardproof::testing::OnnxBuilder {
  llvm::Expected<ir::Graph> load(onnxio::LoadOptions opts = {}) {
    return onnxio::loadModelFromBytes(bytes(), "model.onnx", opts);
  }
};

std::string userErrorText(llvm::Expected<ir::Graph> g) {
  EXPECT_FALSE(static_cast<bool>(g)) << "expected an error";
  if (g)
    return "";
  auto e = takeError(g.takeError());
  EXPECT_EQ(e.kind, ErrorKind::User) << e.text;
  return e.text;
}

} // namespace

TEST(Loader, SymbolicDimsBecomeNamedSymbols) {
  ModelBuilder b;
  b.input("x", {"batch", "seq", "8"});
  b.node("/fc/Relu", "Relu", {"x"}, {"y"});
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  ASSERT_EQ(g->inputs.size(), 1u);
  const auto &x = g->values[g->inputs[0]];
  ASSERT_TRUE(x.declared.has_value());
  EXPECT_EQ(x.declared->str(), "[batch, seq, 8]");
  EXPECT_EQ(g->nodes[0].modulePath(), "fc");
  EXPECT_EQ(g->opsets.at(""), 17);
}

// The layer scan compares nodes by their op-table row, looked up once here.
TEST(Loader, EachNodeKnowsItsOpTableRow) {
  ModelBuilder b;
  b.input("x", {"n"});
  b.node("/a/Relu", "Relu", {"x"}, {"y"});
  b.node("/b/Mystery", "NoSuchOp", {"y"}, {"z"});
  b.output("z");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  EXPECT_EQ(g->nodes[0].op, ir::lookupOp("", "Relu"));
  EXPECT_NE(g->nodes[0].op, nullptr);
  EXPECT_EQ(g->nodes[1].op, nullptr) << "an op the table lacks";
}

TEST(Loader, AnonymousInputDimGetsAFreshSymbolOrAnError) {
  ModelBuilder b;
  b.input("x", {"", "4"});
  b.node("n", "Relu", {"x"}, {"y"});
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g));
  EXPECT_EQ(g->values[g->inputs[0]].declared->str(), "[x.0, 4]");
  onnxio::LoadOptions strict;
  strict.freshSymbolsForUnknownDims = false;
  std::string msg = userErrorText(b.load(strict));
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 0"), std::string::npos) << msg;
}

TEST(Loader, RawLittleEndianAndTypedInitializersAgree) {
  ModelBuilder b;
  float raw[3] = {1.5f, -2.0f, 0.25f};
  b.initializer("raw", {3}, onnx::TensorProto::FLOAT).set_raw_data(std::string(reinterpret_cast<char *>(raw), sizeof raw));
  auto &typed = b.initializer("typed", {3}, onnx::TensorProto::FLOAT);
  for (float f : raw)
    typed.add_float_data(f);
  int64_t ints[2] = {7, -9};
  b.initializer("shape", {2}, onnx::TensorProto::INT64).set_raw_data(std::string(reinterpret_cast<char *>(ints), sizeof ints));
  b.node("n", "Add", {"raw", "typed"}, {"y"});
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  EXPECT_TRUE(g->inputs.empty()) << "initializers are not graph inputs";
  ASSERT_EQ(g->initializers.size(), 3u);
  auto data = [&](const char *n) { return g->values[*g->find(n)].init; };
  EXPECT_EQ(data("raw")->floats, data("typed")->floats);
  EXPECT_EQ(data("raw")->floats[1], -2.0);
  EXPECT_EQ(data("shape")->ints, (std::vector<int64_t>{7, -9}));
  EXPECT_TRUE(data("shape")->isInteger());
}

TEST(Loader, HalfPrecisionBitsAreDecoded) {
  ModelBuilder b;
  auto &h = b.initializer("h", {3}, onnx::TensorProto::FLOAT16);
  for (int32_t bits : {0x3c00, 0xc000, 0x3800}) // 1.0, -2.0, 0.5
    h.add_int32_data(bits);
  auto &bf = b.initializer("bf", {1}, onnx::TensorProto::BFLOAT16);
  bf.add_int32_data(0x3fc0); // 1.5
  b.node("n", "Add", {"h", "bf"}, {"y"});
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  EXPECT_EQ(g->values[*g->find("h")].init->floats, (std::vector<double>{1.0, -2.0, 0.5}));
  EXPECT_EQ(g->values[*g->find("bf")].init->floats, (std::vector<double>{1.5}));
}

TEST(Loader, RawDataOfTheWrongLengthIsRejected) {
  ModelBuilder b;
  b.initializer("w", {4}, onnx::TensorProto::FLOAT).set_raw_data(std::string(12, '\0'));
  b.output("w");
  std::string msg = userErrorText(b.load());
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12 bytes"), std::string::npos) << msg;
}

TEST(Loader, ConstantAttributeTensorIsKept) {
  ModelBuilder b;
  auto &n = b.node("c", "Constant", {}, {"y"});
  auto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_int64_data(42);
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  const auto *attr = g->nodes[0].attr("value");
  ASSERT_NE(attr, nullptr);
  ASSERT_EQ(attr->kind, ir::Attribute::Kind::Tensor);
  EXPECT_EQ(attr->tensor->ints, (std::vector<int64_t>{42}));
  EXPECT_EQ(attr->tensor->numElements(), 1);
}

TEST(Loader, OutOfOrderNodesAreSortedStably) {
  ModelBuilder b;
  b.input("x", {"4"});
  b.node("second", "Relu", {"a"}, {"b"});
  b.node("first", "Neg", {"x"}, {"a"});
  b.node("independent", "Abs", {"x"}, {"c"});
  b.output("b");
  b.output("c");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  std::vector<std::string> order;
  for (auto &n : g->nodes)
    order.push_back(n.name);
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "independent"}));
  const auto &b_ = g->values[*g->find("b")];
  EXPECT_EQ(g->nodes[b_.producer].name, "second");
}

TEST(Loader, DefaultDomainSpelledAiOnnxIsTheDefaultDomain) {
  ModelBuilder b;
  auto *ms = b.m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", {"4"});
  b.node("n", "Relu", {"x"}, {"y"}, "ai.onnx");
  b.node("ar", "AllReduce", {"y"}, {"z"}, "com.microsoft");
  b.output("z");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g));
  EXPECT_EQ(g->nodes[0].domain, "");
  EXPECT_EQ(g->nodes[1].domain, "com.microsoft");
}

TEST(Loader, OmittedOptionalInputIsMinusOne) {
  ModelBuilder b;
  b.input("x", {"4"});
  b.node("n", "Clip", {"x", "", ""}, {"y"});
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g));
  EXPECT_EQ(g->nodes[0].inputs, (std::vector<int>{*g->find("x"), -1, -1}));
}

TEST(Loader, DanglingInputSuggestsTheNearestName) {
  ModelBuilder b;
  b.input("hidden_states", {"4"});
  b.node("/mlp/Relu", "Relu", {"hiden_states"}, {"y"});
  b.output("y");
  std::string msg = userErrorText(b.load());
  EXPECT_NE(msg.find("model.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/mlp/Relu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'hidden_states'"), std::string::npos) << msg;
}

TEST(Loader, CycleIsReportedWithANodeOnIt) {
  ModelBuilder b;
  b.input("x", {"4"});
  b.node("a", "Add", {"x", "c"}, {"b"});
  b.node("b", "Relu", {"b"}, {"c"});
  b.output("c");
  std::string msg = userErrorText(b.load());
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
}

TEST(Loader, TwoProducersOfOneTensorAreRejected) {
  ModelBuilder b;
  b.input("x", {"4"});
  b.node("p", "Relu", {"x"}, {"y"});
  b.node("q", "Neg", {"x"}, {"y"});
  b.output("y");
  std::string msg = userErrorText(b.load());
  EXPECT_NE(msg.find("'p'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'q'"), std::string::npos) << msg;
}

TEST(Loader, OutputNobodyProducesIsRejected) {
  ModelBuilder b;
  b.input("x", {"4"});
  b.node("p", "Relu", {"x"}, {"y"});
  b.output("why");
  std::string msg = userErrorText(b.load());
  EXPECT_NE(msg.find("'why'"), std::string::npos) << msg;
}

TEST(Loader, GarbageAndEmptyBytesAreUserErrorsNamingTheFile) {
  for (std::string bytes : {std::string(""), std::string("\xff\xff\xff\x07not onnx")}) {
    auto g = onnxio::loadModelFromBytes(bytes, "weights.onnx");
    std::string msg = userErrorText(std::move(g));
    EXPECT_NE(msg.find("weights.onnx"), std::string::npos) << msg;
  }
}

TEST(Loader, MissingFileIsAUserError) {
  std::string msg = userErrorText(onnxio::loadModel("/nonexistent/dir/model.onnx"));
  EXPECT_NE(msg.find("/nonexistent/dir/model.onnx"), std::string::npos) << msg;
}

TEST(Loader, ExternalDataIsUnsupportedNotGuessed) {
  ModelBuilder b;
  auto &t = b.initializer("w", {2}, onnx::TensorProto::FLOAT);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  b.output("w");
  auto g = b.load();
  ASSERT_FALSE(static_cast<bool>(g));
  auto e = takeError(g.takeError());
  EXPECT_EQ(e.kind, ErrorKind::Unsupported) << e.text;
  EXPECT_NE(e.text.find("external"), std::string::npos) << e.text;
}

// `check --jobs N` parses the rank files on N threads. The graphs must be the
// ones a sequential load gives, in path order, and a bad file must be
// reported as the first in path order, whichever thread met it first.
TEST(Loader, ParallelLoadGivesTheSequentialGraphsAndFirstError) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / ("shardproof-loadmodels-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (int r = 0; r < 5; ++r) {
    ModelBuilder b;
    b.input("x", {"batch", std::to_string(r + 1)});
    b.node("/rank" + std::to_string(r) + "/Relu", "Relu", {"x"}, {"y"});
    b.output("y");
    paths.push_back((dir / ("rank" + std::to_string(r) + ".onnx")).string());
    std::ofstream(paths.back(), std::ios::binary) << b.bytes();
  }
  for (unsigned jobs : {1u, 3u, 8u}) {
    auto gs = onnxio::loadModels(paths, jobs);
    ASSERT_TRUE(static_cast<bool>(gs)) << shardproof::toString(gs.takeError());
    ASSERT_EQ(gs->size(), paths.size());
    for (size_t r = 0; r < paths.size(); ++r) {
      EXPECT_EQ((*gs)[r].path, paths[r]);
      EXPECT_EQ((*gs)[r].values[(*gs)[r].inputs[0]].declared->str(), "[batch, " + std::to_string(r + 1) + "]");
    }
  }
  std::ofstream(paths[3], std::ios::binary) << "garbage";
  std::ofstream(paths[4], std::ios::binary) << "";
  for (unsigned jobs : {1u, 4u}) {
    std::string msg = userErrorText([&]() -> llvm::Expected<ir::Graph> {
      auto gs = onnxio::loadModels(paths, jobs);
      if (!gs)
        return gs.takeError();
      return std::move(gs->front());
    }());
    EXPECT_NE(msg.find("rank3.onnx"), std::string::npos) << msg;
  }
  fs::remove_all(dir);
}

// Review annotations point at the user's Python: the capture package writes
// "file:line in function" into each node's doc_string, torch's own exporter
// (verbose=True) a stack whose first frame outside torch is the user's line.
TEST(Loader, DocStringGivesTheNodesPythonLine) {
  ModelBuilder b;
  b.input("x", {"n"});
  b.node("/fc/Relu", "Relu", {"x"}, {"a"}).set_doc_string("/src/model/mlp.py:42 in forward");
  b.node("/fc/Tanh", "Tanh", {"a"}, {"c"})
      .set_doc_string("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py(114): forward\n"
                      "/usr/lib/python3/dist-packages/torch/nn/modules/module.py(1194): _call_impl\n"
                      "/home/me/tp.py(7): forward\n/usr/lib/python3/dist-packages/torch/jit/_trace.py(118): wrapper");
  b.node("/fc/Exp", "Exp", {"c"}, {"d"})
      .set_doc_string("/usr/lib/python3/dist-packages/torch/autograd/__init__.py(300): grad\n"
                      "/usr/lib/python3/dist-packages/torch/jit/_trace.py(118): wrapper\n"
                      "/home/me/export_script.py(12): main");
  b.node("/fc/Neg", "Neg", {"d"}, {"e"}).set_doc_string("file.py:99999999999 in f");
  b.node("/fc/Abs", "Abs", {"e"}, {"y"}).set_doc_string("a comment, not a place");
  b.output("y");
  auto g = b.load();
  ASSERT_TRUE(static_cast<bool>(g)) << shardproof::toString(g.takeError());
  EXPECT_EQ(g->nodes[0].source.file, "/src/model/mlp.py");
  EXPECT_EQ(g->nodes[0].source.line, 42);
  EXPECT_EQ(g->nodes[0].sourceFunction, "forward");
  EXPECT_EQ(g->nodes[1].source.file, "/home/me/tp.py");
  EXPECT_EQ(g->nodes[1].source.line, 7);
  EXPECT_EQ(g->nodes[2].source.line, 0) << "the backward pass's node: the caller of export did not write it";
  EXPECT_EQ(g->nodes[3].source.line, 0) << "a line number too large for an int is no location";
  EXPECT_EQ(g->nodes[4].source.line, 0) << "free text is no location";
}
