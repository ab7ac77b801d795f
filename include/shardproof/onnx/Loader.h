// Loading ONNX files (as torch.onnx.export writes them) into ir::Graph.
#pragma once

#include "shardproof/ir/Graph.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace shardproof::onnxio {

struct LoadOptions {
  /// Unknown dims on graph inputs get a fresh symbol named "<tensor>.<axis>";
  /// if false they are an error.
  bool freshSymbolsForUnknownDims = true;
};

/// Reads and validates one model. User errors (missing file, not a protobuf,
/// a cycle, a dangling tensor name, an input without a shape, ...) come back as
/// Diag{User} naming the file and the offending node or tensor.
llvm::Expected<ir::Graph> loadModel(const std::string &path, const LoadOptions &opts = {});

/// Several models, as loadModel each: files are read and their protobufs
/// parsed on up to `jobs` threads (nothing there touches solver state), then
/// the graphs are built in order on the calling thread. The error returned is
/// the first in path order, as a sequential load would give.
llvm::Expected<std::vector<ir::Graph>> loadModels(const std::vector<std::string> &paths, unsigned jobs,
                                                  const LoadOptions &opts = {});

/// Same, from bytes in memory (for tests and fuzzing); `displayName` is used in messages.
llvm::Expected<ir::Graph> loadModelFromBytes(const std::string &bytes, const std::string &displayName,
                                             const LoadOptions &opts = {});

} // namespace shardproof::onnxio
