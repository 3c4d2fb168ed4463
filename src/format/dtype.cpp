#include "format/dtype.h"

#include <cctype>

namespace oxi {

namespace {
struct Entry {
  DType type;
  DTypeTraits traits;
};
// Block sizes/bytes from the GGUF/ggml type table (facts of the file format).
constexpr Entry kTypes[] = {
    {DType::F32, {"F32", 1, 4}},          {DType::F16, {"F16", 1, 2}},
    {DType::Q4_0, {"Q4_0", 32, 18}},      {DType::Q4_1, {"Q4_1", 32, 20}},
    {DType::Q5_0, {"Q5_0", 32, 22}},      {DType::Q5_1, {"Q5_1", 32, 24}},
    {DType::Q8_0, {"Q8_0", 32, 34}},      {DType::Q8_1, {"Q8_1", 32, 36}},
    {DType::Q2_K, {"Q2_K", 256, 84}},     {DType::Q3_K, {"Q3_K", 256, 110}},
    {DType::Q4_K, {"Q4_K", 256, 144}},    {DType::Q5_K, {"Q5_K", 256, 176}},
    {DType::Q6_K, {"Q6_K", 256, 210}},    {DType::Q8_K, {"Q8_K", 256, 292}},
    {DType::IQ2_XXS, {"IQ2_XXS", 256, 66}}, {DType::IQ2_XS, {"IQ2_XS", 256, 74}},
    {DType::IQ3_XXS, {"IQ3_XXS", 256, 98}}, {DType::IQ1_S, {"IQ1_S", 256, 50}},
    {DType::IQ4_NL, {"IQ4_NL", 32, 18}},  {DType::IQ3_S, {"IQ3_S", 256, 110}},
    {DType::IQ2_S, {"IQ2_S", 256, 82}},   {DType::IQ4_XS, {"IQ4_XS", 256, 136}},
    {DType::I8, {"I8", 1, 1}},            {DType::I16, {"I16", 1, 2}},
    {DType::I32, {"I32", 1, 4}},          {DType::I64, {"I64", 1, 8}},
    {DType::F64, {"F64", 1, 8}},          {DType::IQ1_M, {"IQ1_M", 256, 56}},
    {DType::BF16, {"BF16", 1, 2}},        {DType::TQ1_0, {"TQ1_0", 256, 54}},
    {DType::TQ2_0, {"TQ2_0", 256, 66}},   {DType::MXFP4, {"MXFP4", 32, 17}},
    {DType::U8, {"U8", 1, 1}},            {DType::BOOL, {"BOOL", 1, 1}},
    {DType::U32, {"U32", 1, 4}},
    // 8 bytes of f32 scale + bias, then G·bits/8 bytes of codes.
    {DType::MLX_Q4_G32, {"MLX_Q4_G32", 32, 8 + 16}},    {DType::MLX_Q4_G64, {"MLX_Q4_G64", 64, 8 + 32}},
    {DType::MLX_Q4_G128, {"MLX_Q4_G128", 128, 8 + 64}}, {DType::MLX_Q8_G32, {"MLX_Q8_G32", 32, 8 + 32}},
    {DType::MLX_Q8_G64, {"MLX_Q8_G64", 64, 8 + 64}},    {DType::MLX_Q8_G128, {"MLX_Q8_G128", 128, 8 + 128}},
};
}  // namespace

std::optional<DTypeTraits> dtype_traits(DType t) {
  for (const auto& e : kTypes) {
    if (e.type == t) return e.traits;
  }
  return std::nullopt;
}

std::optional<DTypeTraits> dtype_traits(uint32_t raw_id) { return dtype_traits(static_cast<DType>(raw_id)); }

std::string dtype_name(DType t) {
  if (auto tr = dtype_traits(t)) return tr->name;
  return "type#" + std::to_string(static_cast<uint32_t>(t));
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kTypes) {
    std::string_view n = e.traits.name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i) {
      eq = std::toupper(static_cast<unsigned char>(name[i])) == n[i];
    }
    if (eq) return e.type;
  }
  return std::nullopt;
}

std::optional<DType> mlx_dtype(int bits, int group_size) {
  const int g = group_size == 32 ? 0 : group_size == 64 ? 1 : group_size == 128 ? 2 : -1;
  if (g < 0 || (bits != 4 && bits != 8)) return std::nullopt;
  return static_cast<DType>(static_cast<uint32_t>(bits == 4 ? DType::MLX_Q4_G32 : DType::MLX_Q8_G32) + static_cast<uint32_t>(g));
}

bool is_mlx_dtype(DType t) {
  const auto v = static_cast<uint32_t>(t);
  return v >= static_cast<uint32_t>(DType::MLX_Q4_G32) && v <= static_cast<uint32_t>(DType::MLX_Q8_G128);
}

std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n_elems) {
  auto tr = dtype_traits(t);
  if (!tr || n_elems % tr->block_elems != 0) return std::nullopt;
  const uint64_t blocks = n_elems / tr->block_elems;
  if (blocks > ~0ull / tr->block_bytes) return std::nullopt;
  return blocks * tr->block_bytes;
}

}  // namespace oxi
