#include "hlo/ir/float16.h"

#include <cmath>

namespace tpuoff::hlo {

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t word;
  if (exp == 0) {
    if (mant == 0) {
      word = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        ++shift;
      }
      mant &= 0x3ffu;
      word = sign | static_cast<uint32_t>(127 - 15 + 1 - shift) << 23 |
             (mant << 13);
    }
  } else if (exp == 0x1f) {
    word = sign | 0x7f800000u | (mant << 13);
  } else {
    word = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t word;
  std::memcpy(&word, &f, sizeof(word));
  uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000u);
  uint32_t abs = word & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow -> inf (RNE)
  if (abs < 0x38800000u) {  // result is subnormal or zero
    // f16 subnormal unit is 2^-24; round |f| / 2^-24 to nearest even.
    float scaled = std::ldexp(std::fabs(f), 24);
    float rounded = std::nearbyint(scaled);  // default mode: nearest even
    return sign | static_cast<uint16_t>(rounded);
  }
  uint32_t lsb = (abs >> 13) & 1u;
  abs += 0xfffu + lsb;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t mant = (abs >> 13) & 0x3ffu;
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(mant);
}

}  // namespace tpuoff::hlo
