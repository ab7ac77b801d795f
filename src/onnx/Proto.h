// Internal to the onnx layer: protobuf messages -> IR pieces. Only src/onnx
// includes the ONNX protobuf headers.
#pragma once

#include "shardproof/ir/Graph.h"

#include <onnx/onnx_pb.h>

#include <llvm/Support/Error.h>

namespace shardproof::onnxio {

ir::DType dtypeOf(int32_t onnxType);

/// TensorProto -> TensorData (row-major doubles or int64s). `where` names the
/// tensor in error messages ("file: initializer 'w1'").
llvm::Expected<std::shared_ptr<const ir::TensorData>> convertTensor(const onnx::TensorProto &t,
                                                                   const std::string &where);

/// AttributeProto -> Attribute; unknown kinds become Kind::Other (ops that need
/// them report it, so nothing is silently defaulted).
llvm::Expected<ir::Attribute> convertAttribute(const onnx::AttributeProto &a, const std::string &where);

} // namespace shardproof::onnxio
