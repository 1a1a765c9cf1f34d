// bf16 / f16 <-> f32 conversions with round-to-nearest-even, as XLA:CPU does.
#ifndef TPUOFF_HLO_IR_FLOAT16_H_
#define TPUOFF_HLO_IR_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace tpuoff::hlo {

inline float Bf16ToF32(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}

inline uint16_t F32ToBf16(float f) {
  uint32_t word;
  std::memcpy(&word, &f, sizeof(word));
  if ((word & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and NaN
    return static_cast<uint16_t>((word >> 16) | 0x0040u);
  }
  uint32_t lsb = (word >> 16) & 1u;
  word += 0x7fffu + lsb;
  return static_cast<uint16_t>(word >> 16);
}

inline float RoundToBf16(float f) { return Bf16ToF32(F32ToBf16(f)); }

float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float f);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_FLOAT16_H_
