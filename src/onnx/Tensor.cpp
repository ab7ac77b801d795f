// Tensor and attribute payloads: every storage form torch.onnx.export and the
// ONNX helpers write (typed fields, raw little-endian bytes, fp16/bf16 bits).
#include "Proto.h"

#include <cmath>
#include <cstring>

namespace shardproof::onnxio {

using ir::DType;

DType dtypeOf(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT: return DType::Float;
  case onnx::TensorProto::DOUBLE: return DType::Double;
  case onnx::TensorProto::FLOAT16: return DType::Float16;
  case onnx::TensorProto::BFLOAT16: return DType::BFloat16;
  case onnx::TensorProto::INT64: return DType::Int64;
  case onnx::TensorProto::INT32: return DType::Int32;
  case onnx::TensorProto::INT16: return DType::Int16;
  case onnx::TensorProto::INT8: return DType::Int8;
  case onnx::TensorProto::UINT8: return DType::UInt8;
  case onnx::TensorProto::BOOL: return DType::Bool;
  default: return DType::Other;
  }
}

static double halfToDouble(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(frac, -24);
  else if (exp == 31)
    v = frac ? NAN : INFINITY;
  else
    v = std::ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}

static double bf16ToDouble(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static size_t elementBytes(DType t) {
  switch (t) {
  case DType::Double: case DType::Int64: return 8;
  case DType::Float: case DType::Int32: return 4;
  case DType::Float16: case DType::BFloat16: case DType::Int16: return 2;
  case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
  case DType::Other: return 0;
  }
  return 0;
}

// Decodes one little-endian element of raw_data (x86 and ARM hosts are little-endian).
static void decodeRaw(const char *p, DType t, ir::TensorData &out) {
  switch (t) {
  case DType::Float: { float f; std::memcpy(&f, p, 4); out.floats.push_back(f); break; }
  case DType::Double: { double d; std::memcpy(&d, p, 8); out.floats.push_back(d); break; }
  case DType::Float16: { uint16_t h; std::memcpy(&h, p, 2); out.floats.push_back(halfToDouble(h)); break; }
  case DType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); out.floats.push_back(bf16ToDouble(h)); break; }
  case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); out.ints.push_back(v); break; }
  case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); out.ints.push_back(v); break; }
  case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); out.ints.push_back(v); break; }
  case DType::Int8: out.ints.push_back(static_cast<int8_t>(*p)); break;
  case DType::UInt8: case DType::Bool: out.ints.push_back(static_cast<uint8_t>(*p)); break;
  case DType::Other: break;
  }
}

static std::string joinDims(const std::vector<int64_t> &dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s;
}

llvm::Expected<std::shared_ptr<const ir::TensorData>> convertTensor(const onnx::TensorProto &t,
                                                                   const std::string &where) {
  auto out = std::make_shared<ir::TensorData>();
  out->dtype = dtypeOf(t.data_type());
  if (out->dtype == DType::Other)
    return unsupportedError(where + ": tensor element type " + std::to_string(t.data_type()) +
                            " is not supported (float/int/bool types are)");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return unsupportedError(where + ": tensor data stored in an external file is not supported yet; "
                            "re-export with the weights inside the model");
  int64_t n = 1;
  for (auto d : t.dims()) {
    if (d < 0)
      return userError(where + ": negative dimension " + std::to_string(d));
    out->dims.push_back(d);
  }
  // The element count must be a number before anything is sized by it.
  for (auto d : t.dims())
    if (__builtin_mul_overflow(n, d, &n))
      return userError(where + ": the element count of dims [" + joinDims(out->dims) + "] overflows int64");
  bool floating = ir::isFloating(out->dtype);

  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    size_t eb = elementBytes(out->dtype);
    if (static_cast<uint64_t>(n) > raw.size() / eb || raw.size() != eb * static_cast<size_t>(n))
      return userError(where + ": raw_data holds " + std::to_string(raw.size()) + " bytes, but " +
                       std::to_string(n) + " elements of " + ir::toString(out->dtype) + " need " +
                       std::to_string(eb) + " bytes each");
    for (int64_t i = 0; i < n; ++i)
      decodeRaw(raw.data() + i * eb, out->dtype, *out);
    return out;
  }

  // Typed fields: which one holds the data depends on the element type.
  switch (out->dtype) {
  case DType::Float:
    for (float f : t.float_data()) out->floats.push_back(f);
    break;
  case DType::Double:
    for (double d : t.double_data()) out->floats.push_back(d);
    break;
  case DType::Float16:
    for (int32_t h : t.int32_data()) out->floats.push_back(halfToDouble(static_cast<uint16_t>(h)));
    break;
  case DType::BFloat16:
    for (int32_t h : t.int32_data()) out->floats.push_back(bf16ToDouble(static_cast<uint16_t>(h)));
    break;
  case DType::Int64:
    for (int64_t v : t.int64_data()) out->ints.push_back(v);
    break;
  default:
    for (int32_t v : t.int32_data()) out->ints.push_back(v);
    break;
  }
  int64_t have = floating ? static_cast<int64_t>(out->floats.size()) : static_cast<int64_t>(out->ints.size());
  if (have != n)
    return userError(where + ": holds " + std::to_string(have) + " values but its dims [" + joinDims(out->dims) +
                     "] need " + std::to_string(n));
  return out;
}

llvm::Expected<ir::Attribute> convertAttribute(const onnx::AttributeProto &a, const std::string &where) {
  using K = ir::Attribute::Kind;
  ir::Attribute out;
  switch (a.type()) {
  case onnx::AttributeProto::INT: out.kind = K::Int; out.i = a.i(); break;
  case onnx::AttributeProto::FLOAT: out.kind = K::Float; out.f = a.f(); break;
  case onnx::AttributeProto::STRING: out.kind = K::String; out.s = a.s(); break;
  case onnx::AttributeProto::INTS:
    out.kind = K::Ints;
    out.ints.assign(a.ints().begin(), a.ints().end());
    break;
  case onnx::AttributeProto::FLOATS:
    out.kind = K::Floats;
    out.floats.assign(a.floats().begin(), a.floats().end());
    break;
  case onnx::AttributeProto::STRINGS:
    out.kind = K::Strings;
    out.strings.assign(a.strings().begin(), a.strings().end());
    break;
  case onnx::AttributeProto::TENSOR: {
    auto t = convertTensor(a.t(), where + ", attribute '" + a.name() + "'");
    if (!t)
      return t.takeError();
    out.kind = K::Tensor;
    out.tensor = *t;
    break;
  }
  default:
    out.kind = K::Other; // graphs, sparse tensors, type protos: ops that need them say so
    break;
  }
  return out;
}

} // namespace shardproof::onnxio
