// ModelProto -> ir::Graph: values with declared symbolic shapes, nodes in a
// stable topological order, and user errors that name the file, the node and
// the nearest existing tensor names.
#include "shardproof/onnx/Loader.h"

#include "Proto.h"
#include "shardproof/ir/Ops.h"

#include <google/protobuf/arena.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <queue>
#include <set>
#include <sstream>
#include <filesystem>
#include <thread>

namespace shardproof::onnxio {

using ir::Graph;
using smt::Expr;

namespace {

std::string normalizeDomain(const std::string &d) { return d == "ai.onnx" ? std::string() : d; }

// A frame of torch's tracer stack, "path(line): function".
bool parseTraceFrame(const std::string &l, std::string &file, int &line, std::string &fn) {
  size_t close = l.rfind("): "), open = close == std::string::npos ? close : l.rfind('(', close);
  if (open == std::string::npos || open == 0 || close <= open + 1)
    return false;
  std::string num = l.substr(open + 1, close - open - 1);
  if (num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos)
    return false;
  file = l.substr(0, open);
  line = std::stoi(num);
  fn = l.substr(close + 3);
  return true;
}

// The Python line behind a node, from its doc_string: "file:line in function"
// as the capture package writes it, or torch's own stack (export with
// verbose=True), of which the first frame outside torch is the user's line.
// Anything else is no location; a doc_string is a comment, never an error.
void setSource(ir::Node &node, const std::string &doc) {
  if (doc.empty() || doc.size() > 100000)
    return;
  std::string first = doc.substr(0, doc.find('\n'));
  if (first.size() == doc.size()) {
    std::string where = first.substr(0, first.find(" in "));
    size_t colon = where.rfind(':');
    if (colon != std::string::npos && colon > 0 && colon + 1 < where.size() && where.size() - colon <= 10 &&
        where.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
      node.source = SrcLoc{where.substr(0, colon), std::stoi(where.substr(colon + 1)), 0};
      if (where.size() < first.size())
        node.sourceFunction = first.substr(where.size() + 4);
      return;
    }
  }
  std::istringstream in(doc);
  for (std::string l; std::getline(in, l);) {
    std::string file, fn;
    int line = 0;
    if (!parseTraceFrame(l, file, line, fn))
      continue;
    // Past the tracer's own frames lies the code that called export, not a
    // line that emitted the node (the backward pass has none).
    if (file.find("/torch/jit/") != std::string::npos || file.find("/torch/onnx/") != std::string::npos)
      return;
    if (file.find("/torch/") == std::string::npos) {
      node.source = SrcLoc{file, line, 0};
      node.sourceFunction = fn;
      return;
    }
  }
}

// The newest opset of the default domain in an ONNX release (ONNX 1.18).
constexpr int64_t kNewestOnnxOpset = 23;

class Builder {
  // What the torch 2 capture writes into the model's metadata: the guard the
  // graph was traced under, and "name=2;other=2", each a dim_param and the
  // least size the graph holds for.
  llvm::Error readCaptureMetadata(const onnx::ModelProto &m) {
    for (const auto &p : m.metadata_props()) {
      if (p.key() == "shardproof.assume") {
        if (p.value().size() > 100000)
          return err("metadata shardproof.assume is " + std::to_string(p.value().size()) + " bytes long");
        g_.assumption = p.value();
      }
      if (p.key() != "shardproof.size_min")
        continue;
      std::istringstream in(p.value());
      for (std::string item; std::getline(in, item, ';');) {
        size_t eq = item.find('=');
        std::string num = eq == std::string::npos ? "" : item.substr(eq + 1);
        if (eq == 0 || num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos)
          return err("metadata shardproof.size_min has '" + item + "'; expected name=N");
        g_.sizeMins[item.substr(0, eq)] = std::stoll(num);
      }
    }
    return llvm::Error::success();
  }

public:
  Builder(const std::string &file, const LoadOptions &opts) : file_(file), opts_(opts) { g_.path = file; }

  llvm::Expected<Graph> build(const onnx::ModelProto &m) {
    if (!m.has_graph())
      return err("the model has no graph");
    for (auto &op : m.opset_import()) {
      std::string domain = normalizeDomain(op.domain());
      // A version no ONNX release has is a broken file, not a newer model.
      if (domain.empty() && (op.version() < 1 || op.version() > kNewestOnnxOpset))
        return err("imports opset " + std::to_string(op.version()) +
                   " of the default ONNX domain; ONNX releases define opsets 1 to " + std::to_string(kNewestOnnxOpset));
      g_.opsets[domain] = op.version();
    }
    if (auto e = readCaptureMetadata(m))
      return std::move(e);
    const onnx::GraphProto &gp = m.graph();
    g_.name = gp.name();
    // Sized once: a 126-layer rank has a million values and nodes.
    size_t values = static_cast<size_t>(gp.initializer_size() + gp.input_size());
    for (const auto &n : gp.node())
      values += static_cast<size_t>(n.output_size());
    g_.values.reserve(values);
    g_.nodes.reserve(static_cast<size_t>(gp.node_size()));
    g_.byName = llvm::StringMap<int>(static_cast<unsigned>(values));

    // Initializers first: older exporters also list them as graph inputs.
    for (auto &t : gp.initializer()) {
      if (g_.find(t.name()))
        return err("initializer '" + t.name() + "' is defined twice");
      auto data = convertTensor(t, file_ + ": initializer '" + t.name() + "'");
      if (!data)
        return data.takeError();
      int id = addValue(t.name());
      g_.values[id].dtype = (*data)->dtype;
      g_.values[id].init = *data;
      g_.initializers.push_back(id);
    }
    std::set<std::string> inputNames;
    for (auto &vi : gp.input()) {
      // Listed twice, one name would stand for two tensors of possibly
      // different shapes: which one a reader means is a guess.
      if (!inputNames.insert(vi.name()).second)
        return err("graph input '" + vi.name() + "' is declared twice");
      auto existing = g_.find(vi.name());
      int id = existing ? *existing : addValue(vi.name());
      if (auto e = declare(id, vi, /*isGraphInput=*/true))
        return std::move(e);
      if (!existing)
        g_.inputs.push_back(id);
    }
    if (auto e = addNodes(gp))
      return std::move(e);
    for (auto &vi : gp.output()) {
      auto id = g_.find(vi.name());
      if (!id)
        return err("graph output '" + vi.name() + "' is not produced by any node" +
                   didYouMean(vi.name(), g_.valueNames()));
      if (auto e = declare(*id, vi, /*isGraphInput=*/false))
        return std::move(e);
      g_.outputs.push_back(*id);
    }
    // value_info shapes of intermediates; skipped for outputs of custom-domain
    // nodes, whose shapes torch's exporter is known to get wrong.
    for (auto &vi : gp.value_info()) {
      auto id = g_.find(vi.name());
      if (!id || g_.values[*id].declared)
        continue;
      int p = g_.values[*id].producer;
      if (p >= 0 && !g_.nodes[p].domain.empty())
        continue;
      if (auto e = declare(*id, vi, /*isGraphInput=*/false))
        return std::move(e);
    }
    return std::move(g_);
  }

private:
  llvm::Error err(const std::string &msg) { return userError(file_ + ": " + msg); }

  // A value of this name, not yet in the name table.
  int newValue(const std::string &name) {
    int id = static_cast<int>(g_.values.size());
    g_.values.emplace_back().name = name;
    return id;
  }
  int addValue(const std::string &name) {
    int id = newValue(name);
    g_.byName[name] = id;
    return id;
  }

  // Records dtype and declared shape from a ValueInfoProto.
  llvm::Error declare(int id, const onnx::ValueInfoProto &vi, bool isGraphInput) {
    ir::Value &v = g_.values[id];
    if (!vi.type().has_tensor_type()) {
      if (isGraphInput)
        return unsupportedError(file_ + ": graph input '" + vi.name() + "' is not a tensor (sequences and maps are not supported)");
      return llvm::Error::success();
    }
    const auto &tt = vi.type().tensor_type();
    if (tt.elem_type() != 0 && v.dtype == ir::DType::Other)
      v.dtype = dtypeOf(tt.elem_type());
    if (!tt.has_shape())
      return llvm::Error::success();
    ir::Shape s;
    for (int a = 0; a < tt.shape().dim_size(); ++a) {
      const auto &d = tt.shape().dim(a);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0)
          return err("tensor '" + vi.name() + "' has negative size " + std::to_string(d.dim_value()) + " on axis " +
                     std::to_string(a));
        s.dims.push_back(Expr::intConst(d.dim_value()));
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        s.dims.push_back(Expr::intVar(d.dim_param()));
      } else if (isGraphInput && !opts_.freshSymbolsForUnknownDims) {
        return err("graph input '" + vi.name() + "' has no size and no dim_param on axis " + std::to_string(a));
      } else if (isGraphInput) {
        // An anonymous dim is still some size; give it a name the report can show.
        s.dims.push_back(Expr::intVar(vi.name() + "." + std::to_string(a)));
      } else {
        return llvm::Error::success(); // partially known intermediate shape: ignore it
      }
    }
    // No tensor holds more elements than an int64 counts: such a size is corrupt.
    int64_t count = 1;
    for (const auto &d : s.dims)
      if (auto c = d.asInt(); c && __builtin_mul_overflow(count, *c, &count))
        return err("tensor '" + vi.name() + "' has sizes whose element count overflows int64 (" + s.str() + ")");
    v.declared = s;
    return llvm::Error::success();
  }

  // A name's entry in the graph's name table. StringMap entries never move,
  // so a node's reads and writes are looked up once and kept for addNode.
  using NameEntry = llvm::StringMapEntry<int>;

  llvm::Error addNodes(const onnx::GraphProto &gp) {
    const int N = gp.node_size();
    // Every name a node writes enters the table once, standing for its
    // producer (-2 - node) until that node is added: then the double
    // definitions are caught and each read resolves with one lookup (three
    // lookups a name were a quarter of loading a 126-layer rank).
    std::vector<NameEntry *> writes, reads;
    std::vector<int> writesAt(N + 1, 0), readsAt(N + 1, 0);
    for (int n = 0; n < N; ++n) {
      writesAt[n] = static_cast<int>(writes.size());
      for (auto &o : gp.node(n).output()) {
        if (o.empty()) {
          writes.push_back(nullptr);
          continue;
        }
        auto [it, fresh] = g_.byName.try_emplace(o, -2 - n);
        if (!fresh && it->second >= 0)
          return err("node " + describe(gp.node(n), n) + " writes '" + o + "', which is already a graph input or initializer");
        if (!fresh) {
          int first = -2 - it->second;
          return err("tensor '" + o + "' is written by two nodes: " + describe(gp.node(first), first) + " and " +
                     describe(gp.node(n), n));
        }
        writes.push_back(&*it);
      }
    }
    writesAt[N] = static_cast<int>(writes.size());
    // Who waits for whom: (producer, reader) once per read.
    std::vector<int> pending(N, 0);
    std::vector<std::pair<int, int>> edges;
    bool inFileOrder = true;
    for (int n = 0; n < N; ++n) {
      readsAt[n] = static_cast<int>(reads.size());
      for (auto &in : gp.node(n).input()) {
        if (in.empty()) {
          reads.push_back(nullptr);
          continue;
        }
        auto it = g_.byName.find(in);
        if (it == g_.byName.end()) {
          std::vector<std::string> names;
          for (auto &kv : g_.byName)
            names.push_back(kv.getKey().str());
          return err("node " + describe(gp.node(n), n) + " reads '" + in +
                     "', which no node, graph input or initializer defines" + didYouMean(in, names));
        }
        reads.push_back(&*it);
        if (it->second < 0) {
          int producer = -2 - it->second;
          ++pending[n];
          edges.emplace_back(producer, n);
          inFileOrder &= producer < n;
        }
      }
    }
    readsAt[N] = static_cast<int>(reads.size());
    std::vector<int> order;
    order.reserve(N);
    if (inFileOrder) {
      for (int n = 0; n < N; ++n)
        order.push_back(n); // what torch.onnx.export writes: no sorting needed
    } else {
      // Kahn's algorithm, always taking the lowest file position first, so
      // the nodes already in order keep it.
      std::vector<int> usersAt(N + 1, 0), users(edges.size());
      for (auto &e : edges)
        ++usersAt[e.first + 1];
      for (int n = 0; n < N; ++n)
        usersAt[n + 1] += usersAt[n];
      std::vector<int> fill(usersAt.begin(), usersAt.end() - 1);
      for (auto &e : edges)
        users[fill[e.first]++] = e.second;
      std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
      for (int n = 0; n < N; ++n)
        if (!pending[n])
          ready.push(n);
      while (!ready.empty()) {
        int n = ready.top();
        ready.pop();
        order.push_back(n);
        for (int k = usersAt[n]; k < usersAt[n + 1]; ++k)
          if (--pending[users[k]] == 0)
            ready.push(users[k]);
      }
      if (order.size() != static_cast<size_t>(N)) {
        for (int n = 0; n < N; ++n)
          if (pending[n])
            return err("the graph has a cycle through node " + describe(gp.node(n), n));
      }
    }
    // data() + offset, not &v[i]: a graph whose nodes read nothing has no reads[0].
    for (int n : order)
      if (auto e = addNode(gp.node(n), n, reads.data() + readsAt[n], writes.data() + writesAt[n]))
        return e;
    return llvm::Error::success();
  }

  static std::string describe(const onnx::NodeProto &n, int idx) {
    std::string name = n.name().empty() ? "#" + std::to_string(idx) : "'" + n.name() + "'";
    return name + " (" + n.op_type() + ")";
  }

  // `reads` and `writes`: the entries of its inputs and outputs (nullptr
  // for an omitted one), from addNodes.
  llvm::Error addNode(const onnx::NodeProto &np, int fileIdx, NameEntry *const *reads, NameEntry *const *writes) {
    ir::Node node;
    node.name = np.name().empty() ? np.op_type() + "_" + std::to_string(fileIdx) : np.name();
    node.opType = np.op_type();
    node.domain = normalizeDomain(np.domain());
    setSource(node, np.doc_string());
    if (!node.domain.empty() && !g_.opsets.count(node.domain)) {
      std::string imported;
      for (auto &[d, v] : g_.opsets)
        imported += std::string(imported.empty() ? "" : ", ") + "'" + (d.empty() ? "ai.onnx" : d) + "'";
      return err("node " + describe(np, fileIdx) + " is in domain '" + node.domain +
                 "', which the model does not import (opset_import lists " + (imported.empty() ? "nothing" : imported) +
                 ")");
    }
    for (auto &a : np.attribute()) {
      auto attr = convertAttribute(a, file_ + ": node '" + node.name + "'");
      if (!attr)
        return attr.takeError();
      node.attrs[a.name()] = std::move(*attr);
    }
    node.inputs.reserve(np.input_size());
    for (int k = 0; k < np.input_size(); ++k) {
      assert(!reads[k] || reads[k]->second >= 0); // producers come first
      node.inputs.push_back(reads[k] ? reads[k]->second : -1);
    }
    // A known op with too few or too many inputs is a malformed file (a
    // one-input Sub): said here, with the file, before anything reads input 1.
    node.op = ir::lookupOp(node.domain, node.opType);
    if (const ir::OpDef *def = node.op) {
      size_t firstEmpty = std::find(node.inputs.begin(), node.inputs.end(), -1) - node.inputs.begin();
      if (auto why = ir::arityProblem(*def, node, node.inputs.size(), firstEmpty))
        return err(*why);
    }
    int nodeId = static_cast<int>(g_.nodes.size());
    for (int slot = 0; slot < np.output_size(); ++slot) {
      const std::string &o = np.output(slot);
      int id;
      if (o.empty()) {
        id = addValue(node.name + ":unused" + std::to_string(slot)); // an omitted output still occupies its slot
      } else {
        id = newValue(o);
        writes[slot]->second = id; // its table entry, made by addNodes
      }
      g_.values[id].producer = nodeId;
      g_.values[id].producerSlot = slot;
      node.outputs.push_back(id);
    }
    g_.nodes.push_back(std::move(node));
    return llvm::Error::success();
  }

  std::string file_;
  LoadOptions opts_;
  Graph g_;
};

} // namespace

// A parsed file. Its messages live in an arena: a 126-layer rank's million
// small strings and messages are then one allocation run each way, not a
// malloc and a free apiece (parsing and freeing them was a third of the load).
struct Parsed {
  std::unique_ptr<google::protobuf::Arena> arena;
  onnx::ModelProto *model = nullptr;

  Parsed() {
    google::protobuf::ArenaOptions o;
    o.start_block_size = 64 << 10;
    o.max_block_size = 4 << 20;
    arena = std::make_unique<google::protobuf::Arena>(o);
    model = google::protobuf::Arena::CreateMessage<onnx::ModelProto>(arena.get());
  }
};

// The part of a load that needs no solver state: bytes to a ModelProto.
// Returns the message of a user error, empty on success.
static std::string parseBytes(const std::string &bytes, const std::string &displayName, onnx::ModelProto &m) {
  if (bytes.empty())
    return displayName + ": the file is empty, not an ONNX model";
  if (!m.ParseFromString(bytes))
    return displayName + ": not an ONNX model (the protobuf does not parse)";
  return "";
}

static std::string parseFile(const std::string &path, onnx::ModelProto &m) {
  // Only a regular file can be a model: /dev/zero would be read until memory
  // runs out, and a directory reads as empty.
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(st))
    return path + ": is a directory, not an ONNX model";
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    return path + ": is not a regular file (a device, pipe or socket), not an ONNX model";
  // Protobuf parses at most 2 GiB: a larger file cannot be a model it reads.
  uint64_t size = 0;
  if (!ec && std::filesystem::is_regular_file(st))
    if (size = std::filesystem::file_size(path, ec); !ec && size > (uint64_t(2) << 30))
      return path + ": is " + std::to_string(size >> 20) + " MiB, larger than the 2 GiB an ONNX protobuf can hold";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return path + ": cannot open the file (" + std::strerror(errno) + ")";
  // One read of the known size; a file that grows meanwhile is read to its end.
  std::string bytes(ec ? 0 : size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in)
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return parseBytes(bytes, path, m);
}

llvm::Expected<Graph> loadModelFromBytes(const std::string &bytes, const std::string &displayName,
                                         const LoadOptions &opts) {
  Parsed p;
  if (auto why = parseBytes(bytes, displayName, *p.model); !why.empty())
    return userError(why);
  return Builder(displayName, opts).build(*p.model);
}

llvm::Expected<Graph> loadModel(const std::string &path, const LoadOptions &opts) {
  Parsed p;
  if (auto why = parseFile(path, *p.model); !why.empty())
    return userError(why);
  return Builder(path, opts).build(*p.model);
}

llvm::Expected<std::vector<Graph>> loadModels(const std::vector<std::string> &paths, unsigned jobs,
                                              const LoadOptions &opts) {
  std::vector<Parsed> protos(paths.size());
  std::vector<std::string> errors(paths.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < paths.size();)
      errors[i] = parseFile(paths[i], *protos[i].model);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(std::max(jobs, 1u), paths.size()); ++t)
    pool.emplace_back(work);
  work();
  for (auto &t : pool)
    t.join();
  std::vector<Graph> graphs;
  graphs.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!errors[i].empty())
      return userError(errors[i]);
    auto g = Builder(paths[i], opts).build(*protos[i].model);
    if (!g)
      return g.takeError();
    graphs.push_back(std::move(*g));
    protos[i] = Parsed(); // the graph holds what it needs
  }
  return graphs;
}

} // namespace shardproof::onnxio
