// Limits on what a module may describe, shared by every importer (HLO text,
// binary proto, proto JSON) so that hostile or mistyped input is rejected
// with a message at load time instead of exhausting memory later.
#ifndef TPUOFF_HLO_IR_LIMITS_H_
#define TPUOFF_HLO_IR_LIMITS_H_

#include <cstdint>

namespace tpuoff::hlo {

// Largest array one shape may describe (f32[99999999999] is rejected). Far
// above the GRPO kernels' largest logits (B=8, T=4096, V=151936 f32: 20 GB).
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 37;  // 128 GiB
// Deepest nesting of tuple shapes (and of tuple shardings, literals).
inline constexpr int kMaxShapeNesting = 64;

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_LIMITS_H_
